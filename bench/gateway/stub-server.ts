// The stub upstream of the gateway tests (test/helpers/stub-upstream.ts) as a process of its own,
// for benchmarks: streams `--tokens` chunks at once per request; prints its URL on stdout.
//
//   node --import tsx bench/gateway/stub-server.ts [--port 0] [--tokens 4]
import { parseArgs } from 'node:util';
import { StubUpstream } from '../../test/helpers/stub-upstream.ts';

const { values } = parseArgs({ options: { port: { type: 'string', default: '0' }, tokens: { type: 'string', default: '4' } } });
const stub = await new StubUpstream({ tokens: Number(values.tokens), autoRelease: true }).start(Number(values.port));
// The stub keeps every request for the tests' assertions; a benchmark sends tens of thousands.
setInterval(() => (stub.requests.length = 0), 1000).unref();
process.stdout.write(`${stub.url}\n`);
process.on('SIGTERM', () => void stub.stop().then(() => process.exit(0)));
