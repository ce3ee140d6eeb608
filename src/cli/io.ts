/** Where a CLI command writes: the process's stdout and stderr, or a test's buffers. */
export interface CliIo {
  readonly out: { write(text: string): unknown };
  readonly err: { write(text: string): unknown };
  /** What a command reads its input from, when it takes any: the process's stdin by default. */
  readonly in?: AsyncIterable<string | Buffer>;
}
