// The large mailbox providers: their domains take mail for millions of consumers and will go on
// doing so, so a lead's address there needs no DNS lookup. Asking anyway only adds a way to fail:
// a resolver that denies every name would reject the most common leads of all. Exact domains
// only; a subdomain (mail.gmail.com) is not where consumers have mailboxes and is looked up.

export const MAILBOX_PROVIDER_DOMAINS: ReadonlySet<string> = new Set([
  // Google
  'gmail.com',
  'googlemail.com',
  // Yahoo (also the mail of AT&T and Verizon customers)
  'yahoo.com',
  'ymail.com',
  'rocketmail.com',
  'att.net',
  'sbcglobal.net',
  'verizon.net',
  // Microsoft
  'outlook.com',
  'hotmail.com',
  'live.com',
  'msn.com',
  // Apple
  'icloud.com',
  'me.com',
  'mac.com',
  // AOL
  'aol.com',
  // Proton
  'protonmail.com',
  'proton.me',
  'pm.me',
  // GMX and mail.com
  'gmx.com',
  'mail.com',
  // Zoho
  'zoho.com',
  // Comcast (Xfinity)
  'comcast.net',
]);

export function isMailboxProvider(domain: string): boolean {
  return MAILBOX_PROVIDER_DOMAINS.has(domain);
}
