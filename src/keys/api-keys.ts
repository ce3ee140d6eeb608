// API keys as events in one stream, decider style: `evolve` folds the stream into a map of key
// records and each command function turns (state, input) into new events. No I/O here — ids,
// secrets and the clock come in as inputs, so every rule is testable on its own.
import { createHash, randomBytes } from 'node:crypto';

export const API_KEYS_STREAM = 'api-keys';

export const ROLES = ['supplier', 'buyer', 'analyst', 'admin'] as const;
export type Role = (typeof ROLES)[number];

interface ApiKeyIssued {
  readonly type: 'ApiKeyIssued';
  readonly data: { readonly id: string; readonly role: Role; readonly name: string; readonly hash: string; readonly issued_at: string };
}
interface ApiKeyRevoked {
  readonly type: 'ApiKeyRevoked';
  readonly data: { readonly id: string; readonly revoked_at: string };
}
interface ApiKeyRotated {
  readonly type: 'ApiKeyRotated';
  readonly data: { readonly id: string; readonly replaced_by: string; readonly expires_at: string };
}
export type ApiKeyEvent = ApiKeyIssued | ApiKeyRevoked | ApiKeyRotated;

export interface KeyRecord {
  readonly id: string;
  readonly role: Role;
  readonly name: string;
  /** sha256 of the secret's text, lower-case hex. */
  readonly hash: string;
  readonly issued_at: string;
  readonly revoked_at: string | null;
  readonly replaced_by: string | null;
  /** Set by a rotation: the key works until this instant, then stops. */
  readonly expires_at: string | null;
}

export type KeyState = ReadonlyMap<string, KeyRecord>;
export type KeyStatus = 'active' | 'revoked' | 'expiring' | 'expired';

export const initialKeyState: KeyState = new Map();

const ID = /^[0-9a-z]{12}$/;
// 32 bytes in base64url without padding is always 43 characters.
const SECRET = /^[A-Za-z0-9_-]{43}$/;
const NAME = /^[A-Za-z0-9._-]{1,64}$/;
const KEY = /^lp_([0-9a-z]{12})_([A-Za-z0-9_-]{43})$/;
/** A year: a longer grace would defeat the point of rotating. */
export const MAX_GRACE_SECONDS = 365 * 24 * 3600;

/** Why a command cannot run: `invalid` input (usage), `not_found` id, or a `conflict` with the key's state. */
export class KeyCommandError extends Error {
  override readonly name = 'KeyCommandError';
  constructor(
    readonly kind: 'invalid' | 'not_found' | 'conflict',
    message: string,
  ) {
    super(message);
  }
}

export const isRole = (value: unknown): value is Role => (ROLES as readonly unknown[]).includes(value);
export const isKeyId = (value: string): boolean => ID.test(value);
export const isKeyName = (value: string): boolean => NAME.test(value);

/** A fresh id and secret; the only impure helper here, kept apart from the command functions. */
export function newKeyMaterial(): { id: string; secret: string } {
  return { id: randomBytes(6).toString('hex'), secret: randomBytes(32).toString('base64url') };
}

export const formatKey = (id: string, secret: string): string => `lp_${id}_${secret}`;

/** `{id, secret}` of a well-formed key text, else null. Callers must bound the length first if it matters. */
export function parseKey(text: string): { id: string; secret: string } | null {
  const match = KEY.exec(text);
  return match ? { id: match[1]!, secret: match[2]! } : null;
}

/** The hash stored in place of the secret. It hashes the secret's text, so checking needs no decoding. */
export const hashSecret = (secret: string): string => createHash('sha256').update(secret, 'utf8').digest('hex');

export function keyStatus(record: KeyRecord, now: number): KeyStatus {
  if (record.revoked_at !== null) return 'revoked';
  if (record.expires_at !== null) return now < Date.parse(record.expires_at) ? 'expiring' : 'expired';
  return 'active';
}

const iso = (ms: number): string => new Date(ms).toISOString();

function applyEvent(keys: Map<string, KeyRecord>, event: ApiKeyEvent): void {
  const { data } = event;
  if (event.type === 'ApiKeyIssued') {
    const { id, role, name, hash, issued_at } = event.data;
    keys.set(id, { id, role, name, hash, issued_at, revoked_at: null, replaced_by: null, expires_at: null });
    return;
  }
  const record = keys.get(data.id);
  if (!record) return;
  if (event.type === 'ApiKeyRevoked') keys.set(data.id, { ...record, revoked_at: event.data.revoked_at });
  else keys.set(data.id, { ...record, replaced_by: event.data.replaced_by, expires_at: event.data.expires_at });
}

const isString = (value: unknown): value is string => typeof value === 'string';

/**
 * Whether a recorded event is a well-formed key event. Anything else in the stream (a future
 * event type, a damaged record) is skipped rather than allowed to stall the fold.
 */
function isApiKeyEvent(event: { type: string; data: unknown }): event is ApiKeyEvent {
  const data = event.data as Record<string, unknown> | null;
  if (typeof data !== 'object' || data === null || !isString(data.id)) return false;
  switch (event.type) {
    case 'ApiKeyIssued':
      return isRole(data.role) && isString(data.name) && isString(data.hash) && isString(data.issued_at);
    case 'ApiKeyRevoked':
      return isString(data.revoked_at);
    case 'ApiKeyRotated':
      return isString(data.replaced_by) && isString(data.expires_at);
    default:
      return false;
  }
}

export function evolve(state: KeyState, event: ApiKeyEvent): KeyState {
  const next = new Map(state);
  applyEvent(next, event);
  return next;
}

/** `events.reduce(evolve, state)`, copying the map once instead of once per event. */
export function foldKeys(state: KeyState, events: Iterable<{ type: string; data: unknown }>): KeyState {
  const next = new Map(state);
  for (const event of events) if (isApiKeyEvent(event)) applyEvent(next, event);
  return next;
}

function checkMaterial(state: KeyState, id: string, secret: string): void {
  if (!ID.test(id)) throw new KeyCommandError('invalid', 'a key id is 12 lower-case letters or digits');
  if (!SECRET.test(secret)) throw new KeyCommandError('invalid', 'a key secret is 32 bytes in base64url');
  if (state.has(id)) throw new KeyCommandError('conflict', `a key with id '${id}' already exists`);
}

function issued(id: string, role: Role, name: string, secret: string, now: number): ApiKeyIssued {
  return { type: 'ApiKeyIssued', data: { id, role, name, hash: hashSecret(secret), issued_at: iso(now) } };
}

export interface IssueKey {
  readonly role: string;
  readonly name: string;
  readonly now: number;
  readonly id: string;
  readonly secret: string;
}

export function issueKey(state: KeyState, { role, name, now, id, secret }: IssueKey): ApiKeyEvent[] {
  if (!isRole(role)) throw new KeyCommandError('invalid', `role must be one of ${ROLES.join(', ')}`);
  if (!NAME.test(name)) throw new KeyCommandError('invalid', 'name must be 1-64 characters of A-Z a-z 0-9 . _ -');
  checkMaterial(state, id, secret);
  return [issued(id, role, name, secret, now)];
}

function existing(state: KeyState, id: string): KeyRecord {
  const record = state.get(id);
  if (!record) throw new KeyCommandError('not_found', `no key with id '${id}'`);
  return record;
}

/** Revoking twice is not an error: the key is revoked either way, and the stream stays minimal. */
export function revokeKey(state: KeyState, { id, now }: { readonly id: string; readonly now: number }): ApiKeyEvent[] {
  const record = existing(state, id);
  if (record.revoked_at !== null) return [];
  return [{ type: 'ApiKeyRevoked', data: { id, revoked_at: iso(now) } }];
}

export interface RotateKey {
  readonly id: string;
  readonly now: number;
  readonly graceSeconds: number;
  readonly newId: string;
  readonly newSecret: string;
}

/**
 * A key already rotated is refused rather than rotated again: a second rotation would mint a third
 * key and could stretch the old key's life. Rotate its replacement instead.
 */
export function rotateKey(state: KeyState, { id, now, graceSeconds, newId, newSecret }: RotateKey): ApiKeyEvent[] {
  const record = existing(state, id);
  if (!Number.isInteger(graceSeconds) || graceSeconds < 0 || graceSeconds > MAX_GRACE_SECONDS) {
    throw new KeyCommandError('invalid', `grace must be a whole number of seconds from 0 to ${MAX_GRACE_SECONDS}`);
  }
  const status = keyStatus(record, now);
  if (status === 'revoked') throw new KeyCommandError('conflict', `key '${id}' is revoked; issue a new key instead`);
  if (record.replaced_by !== null) {
    throw new KeyCommandError('conflict', `key '${id}' was already rotated (replaced by '${record.replaced_by}'); rotate that key instead`);
  }
  checkMaterial(state, newId, newSecret);
  return [
    issued(newId, record.role, record.name, newSecret, now),
    { type: 'ApiKeyRotated', data: { id, replaced_by: newId, expires_at: iso(now + graceSeconds * 1000) } },
  ];
}
