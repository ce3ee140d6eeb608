import type { TestService } from '../support/service.js';

/** One key of each role the read-back suites read with: two suppliers, the two buyers of their routing files, an analyst, an admin. */
export async function roleKeys(svc: TestService): Promise<Record<'supA' | 'supB' | 'caBuyer' | 'nyBuyer' | 'analyst' | 'admin', string>> {
  return {
    supA: await svc.key('supplier', 'sup-a'),
    supB: await svc.key('supplier', 'sup-b'),
    caBuyer: await svc.key('buyer', 'ca-buyer'),
    nyBuyer: await svc.key('buyer', 'ny-buyer'),
    analyst: await svc.key('analyst', 'ann'),
    admin: await svc.key('admin', 'root'),
  };
}
