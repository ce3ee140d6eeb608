import { mkdirSync, statSync, statfsSync } from 'node:fs';
import { dirname } from 'node:path';

// Making the directories the service keeps its files in (the data dir, the master key's, the
// self-signed certificate's). Node's own recursive mkdir never returns under /proc: a directory
// there refuses a new entry with ENOENT, which Node takes for a missing parent, makes the parent
// (there already), and tries again, for ever. Start-up refuses such a data dir by name (config.ts);
// this is for every place that makes one, whoever called it with whatever path.

/**
 * Filesystems of the kernel that refuse or drop files, by their statfs(2) magic numbers; tmpfs and
 * devtmpfs (/dev) keep files, so are not here.
 */
const KERNEL_FILESYSTEMS = new Map<number, string>([
  [0x9fa0, 'proc'],
  [0x62656572, 'sysfs'],
  [0x27e0eb, 'cgroup'],
  [0x63677270, 'cgroup2'],
  [0x64626720, 'debugfs'],
  [0x74726163, 'tracefs'],
  [0x73636673, 'securityfs'],
  [0x1cd1, 'devpts'],
  [0xcafe4a11, 'bpf'],
  [0x62656570, 'configfs'],
  [0x6165676c, 'pstore'],
  [0xde5e81e4, 'efivarfs'],
  [0x65735543, 'fusectl'],
  [0x42494e4d, 'binfmt_misc'],
]);

/** The kernel filesystem `path` is on, if it is on one of those. */
export function kernelFilesystem(path: string): string | undefined {
  try {
    return KERNEL_FILESYSTEMS.get(statfsSync(path).type >>> 0);
  } catch {
    // A platform without statfs: the caller's own error will have to do.
    return undefined;
  }
}

const codeOf = (error: unknown) => (error as NodeJS.ErrnoException).code;

/**
 * Makes the directory `path` and each missing parent, with `mode` (less the umask), as
 * `mkdir -p` does, one level at a time: a level is tried at most twice (before and after its
 * parent is made), so a directory that refuses new entries ends in an error naming it instead of
 * a loop. A directory already there, or made meanwhile by another process, is fine.
 */
export function makeDirectory(path: string, mode = 0o777): void {
  if (tryMkdir(path, mode)) return;
  const parent = dirname(path);
  if (parent === path) throw new Error(`cannot make the directory ${path}: its root is missing`);
  makeDirectory(parent, mode);
  if (tryMkdir(path, mode)) return;
  const kernel = kernelFilesystem(parent);
  throw Object.assign(
    new Error(`cannot make the directory ${path}: ${parent} takes no new directory${kernel ? ` (a kernel filesystem, ${kernel}, that keeps no files)` : ''}`),
    { code: 'ENOENT' },
  );
}

/** True when `path` is a directory now; false when its parent is missing; else what mkdir said. */
function tryMkdir(path: string, mode: number): boolean {
  try {
    mkdirSync(path, { mode });
    return true;
  } catch (error) {
    if (codeOf(error) === 'ENOENT') return false;
    if (codeOf(error) !== 'EEXIST') throw error;
  }
  // Something is there: a directory (or a link to one), or a file in the way.
  if (statSync(path).isDirectory()) return true;
  throw Object.assign(new Error(`cannot make the directory ${path}: a file of that name is in the way`), { code: 'ENOTDIR' });
}
