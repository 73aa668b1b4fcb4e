// What a predictor artifact must match to be trusted here: the runner, the model file, the machine.
// A conformal bound carried to hardware it was not calibrated on is not conservative but
// arbitrary, so `serve` compares these at start-up (factory.ts).

import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import os from 'node:os';

/** What an artifact trained on gateway traces records for its model: the upstream's, which the gateway has no file of. */
export const GATEWAY_MODEL_SHA = 'upstream';

/** The CPU model and core count, as one comparable string. */
export function machineIdentity(): string {
  const cpus = os.cpus();
  return `${cpus[0]?.model.trim() ?? 'unknown cpu'} x${cpus.length} ${os.arch()}`;
}

/** sha256 of a file, streamed (models are hundreds of MB). */
export function fileSha256(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const h = createHash('sha256');
    createReadStream(path)
      .on('data', (b) => h.update(b))
      .on('error', reject)
      .on('end', () => resolve(h.digest('hex')));
  });
}
