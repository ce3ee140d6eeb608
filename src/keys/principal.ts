// Who an API key belongs to. The HTTP shell only needs the role and the key id (for rate limits and
// the access log); `name` is the principal the commands act for (a supplier id, a buyer id, …).

export type Role = 'supplier' | 'buyer' | 'analyst' | 'admin';

export interface Principal {
  readonly keyId: string;
  readonly role: Role;
  readonly name: string;
}
