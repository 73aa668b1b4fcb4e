// Where `headroom serve` keeps what admission control learns when no --admission-state is given:
// one directory per listening address under the user's state directory (the XDG base directory
// rule: $XDG_STATE_HOME, else ~/.local/state), so that `npm start` twice on one machine starts
// warm the second time, and two servers on two ports never share (or overwrite) each other's state.
//
//   $XDG_STATE_HOME/headroom/admission/<host>-<port>/
//
// A server on port 0 (any free port: the tests, the gate, the ladder) has no address it will have
// again, so it keeps nothing by default. The saved files name what they were measured on
// (persistent-state.ts), so another model or machine behind the same address starts cold, with
// one log line, and never mixes in.

import { homedir } from 'node:os';
import { join } from 'node:path';

/** The user's state directory for Headroom: $XDG_STATE_HOME/headroom, else ~/.local/state/headroom. */
export function stateHome(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env['XDG_STATE_HOME'];
  // The XDG rule: a relative path is invalid and is ignored.
  const base = xdg !== undefined && xdg.startsWith('/') ? xdg : join(env['HOME'] ?? homedir(), '.local', 'state');
  return join(base, 'headroom');
}

/**
 * The default --admission-state directory of a server listening on host:port, or null on port 0.
 * The host keeps letters, digits, '.' and '-'; anything else (an IPv6 address's ':') becomes '_'.
 */
export function defaultAdmissionStateDir(host: string, port: number, env: NodeJS.ProcessEnv = process.env): string | null {
  if (port === 0) return null;
  return join(stateHome(env), 'admission', `${host.replace(/[^\w.-]/g, '_')}-${port}`);
}
