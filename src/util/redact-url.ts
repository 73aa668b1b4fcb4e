// A URL's password out of what people see: /stats's effective configuration and error messages
// print URLs that may carry credentials (`redis://:password@host`, an OTLP endpoint with basic auth).

/** The value with a URL's password replaced by `<redacted>` (`redis://user:<redacted>@host`); any other value as it is. */
export function redactUrlPassword<T>(value: T): T | string {
  if (typeof value !== 'string') return value;
  return value.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/@:]*:)[^/@]*@/i, '$1<redacted>@');
}
