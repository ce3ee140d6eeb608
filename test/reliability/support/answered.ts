import type { Reply } from '../../support/service.js';

/** A request the service never answers fails its case rather than the whole run. */
export async function answered(reply: Promise<Reply>): Promise<Reply> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('no answer within 10 s')), 10_000)));
  try {
    return await Promise.race([reply, late]);
  } finally {
    clearTimeout(timer);
  }
}
