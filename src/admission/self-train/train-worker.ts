// The self-trainer's worker thread: runs each training job it is sent and posts the reply back.
// Training takes a few hundred milliseconds on a thousand rows — off the event loop, so no request
// waits for it (self-trainer.ts).

import { parentPort } from 'node:worker_threads';
import { runTrainJob, type TrainJob } from './train-job.ts';

const port = parentPort;
if (port === null) throw new Error('train-worker.ts runs only as a worker thread');
port.on('message', (job: TrainJob) => port.postMessage(runTrainJob(job)));
