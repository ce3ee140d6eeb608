/** Where a CLI command writes: the process's stdout and stderr, or a test's buffers. */
export interface CliIo {
  readonly out: { write(text: string): unknown };
  readonly err: { write(text: string): unknown };
}
