// The unmodified openai npm client against Headroom in engine mode (the suite: helpers/openai-suite.ts).
import { after, before } from 'node:test';
import OpenAI from 'openai';
import type { TestServer } from '../helpers/headroom.ts';
import { startTestServer } from '../helpers/headroom.ts';
import { openAiClientTests } from '../helpers/openai-suite.ts';

let server: TestServer;
let client: OpenAI;

before(async () => {
  server = await startTestServer();
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(() => server.close());

openAiClientTests(() => client, 'headroom-mock');
