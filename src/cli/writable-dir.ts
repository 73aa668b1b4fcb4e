// A directory flag (`serve --record DIR`), checked before the port is bound: DIR is (or becomes) a
// directory on an ordinary filesystem in which this process can create folders. Anything else is
// a StartupError naming the flag, within a second.
//
// Why not `mkdir(DIR, { recursive: true })`: on Node 20 it never returns for some paths on special
// filesystems (`/proc/self/rec`: mkdir answers ENOENT under an existing parent, and the recursive
// walk retries at full CPU for ever). So the nearest existing ancestor is found with stat, its
// filesystem checked with statfs, and the missing folders created one at a time; a filesystem
// that does not answer at all (a hung network mount) is refused after WRITABLE_DIR_TIMEOUT_MS.

import { mkdir, mkdtemp, rmdir, stat, statfs } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { StartupError } from './startup-errors.ts';

/** Filesystems that hold no files of ours, by statfs f_type (linux/magic.h). */
const SPECIAL_FILESYSTEMS = new Map<number, string>([
  [0x9fa0, 'proc'],
  [0x62656572, 'sysfs'],
  [0x1cd1, 'devpts'],
  [0x27e0eb, 'cgroup'],
  [0x63677270, 'cgroup2'],
  [0x64626720, 'debugfs'],
  [0x74726163, 'tracefs'],
  [0x73636673, 'securityfs'],
  [0xcafe4a11, 'bpf'],
  [0x62656570, 'configfs'],
  [0x6165676c, 'pstore'],
  [0xde5e81e4, 'efivarfs'],
  [0x42494e4d, 'binfmt_misc'],
  [0x19800202, 'mqueue'],
]);

export const WRITABLE_DIR_TIMEOUT_MS = 5000;

/**
 * Make `dir` an existing directory this process can create folders in, or throw a StartupError
 * `<refusal> <dir>: <why>` (e.g. refusal `--record: cannot record to`).
 */
export async function prepareWritableDir(dir: string, refusal: string): Promise<void> {
  const refuse = (why: string, cause?: unknown): StartupError => new StartupError(`${refusal} ${dir}: ${why}`, cause === undefined ? undefined : { cause });
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(refuse(`its filesystem did not answer within ${WRITABLE_DIR_TIMEOUT_MS / 1000} s`)), WRITABLE_DIR_TIMEOUT_MS);
    timer.unref();
  });
  try {
    await Promise.race([prepare(dir, refuse), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function prepare(dir: string, refuse: (why: string, cause?: unknown) => StartupError): Promise<void> {
  const path = resolve(dir);
  // The nearest existing ancestor, and the folders to create below it (outermost first).
  const missing: string[] = [];
  let existing = path;
  for (;;) {
    const st = await stat(existing).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return null;
      throw refuse(err.code === 'ENOTDIR' ? 'a part of the path is not a directory' : reason(err), err);
    });
    if (st !== null) {
      if (!st.isDirectory()) throw refuse(missing.length === 0 ? 'it is not a directory' : `${existing} is not a directory`);
      break;
    }
    missing.unshift(existing);
    const parent = dirname(existing);
    if (parent === existing) throw refuse('no such directory');
    existing = parent;
  }
  const special = SPECIAL_FILESYSTEMS.get((await statfs(existing)).type);
  if (special !== undefined) throw refuse(`${existing} is on a special filesystem (${special}), not one for files`);
  for (const d of missing) {
    try {
      await mkdir(d);
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      // Created meanwhile (another process): fine if it is a directory.
      if (e.code === 'EEXIST' && (await stat(d)).isDirectory()) continue;
      throw refuse(`cannot create ${d} (${reason(e)})`, err);
    }
  }
  // What the recorder will do: create the run's folder in it.
  try {
    await rmdir(await mkdtemp(join(path, '.headroom-probe-')));
  } catch (err) {
    throw refuse(reason(err as NodeJS.ErrnoException), err);
  }
}

function reason(err: NodeJS.ErrnoException): string {
  if (err.code === 'EACCES' || err.code === 'EPERM') return 'no permission to write there';
  if (err.code === 'EROFS') return 'a read-only filesystem';
  if (err.code === 'ENOSPC') return 'no space left on the device';
  return err.code ?? err.message;
}
