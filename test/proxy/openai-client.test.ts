// Gateway mode in front of a real Headroom server (mock runner) passes the same openai-client suite
// as engine mode (helpers/openai-suite.ts): streaming and non-streaming, chat and completions,
// /v1/models, seeds, stop strings, typed errors. Two Headroom upstreams, so picks vary.
import { after, before } from 'node:test';
import OpenAI from 'openai';
import type { TestServer } from '../helpers/headroom.ts';
import { startTestServer } from '../helpers/headroom.ts';
import type { TestGateway } from '../helpers/gateway.ts';
import { startTestGateway } from '../helpers/gateway.ts';
import { openAiClientTests } from '../helpers/openai-suite.ts';

let upstreams: TestServer[];
let gateway: TestGateway;
let client: OpenAI;

before(async () => {
  upstreams = await Promise.all([startTestServer(), startTestServer()]);
  gateway = await startTestGateway(upstreams.map((u) => u.url));
  client = new OpenAI({ baseURL: `${gateway.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  await gateway.close();
  await Promise.all(upstreams.map((u) => u.close()));
});

openAiClientTests(() => client, 'headroom-mock');
