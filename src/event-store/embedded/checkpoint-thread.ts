import { parentPort, workerData } from 'node:worker_threads';
import { openEventsDatabase } from './schema.js';

// Copies committed pages from the WAL into the database file, beside the writer thread. SQLite's
// automatic checkpoint runs inside the commit that crosses its threshold, so every thousandth
// page or so an append waited for a copy and a second fsync; here the writer never does.
// PASSIVE never blocks the writer or readers: it copies what no reader still needs and leaves
// the rest for the next round.

const { file, intervalMs } = workerData as { file: string; intervalMs: number };
const db = openEventsDatabase(file);
const port = parentPort!;

const timer = setInterval(() => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
  } catch {
    // Another connection is checkpointing (SQLITE_BUSY) or the disk failed: the writer reports
    // failures to appenders; this one tries again next round.
  }
}, intervalMs);

port.on('message', (message: 'close') => {
  if (message !== 'close') return;
  clearInterval(timer);
  db.close();
  port.close();
});
port.postMessage('ready');
