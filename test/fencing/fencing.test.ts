import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FENCE_COLUMN_TYPE, FenceRegister, fencedUpdate, fencedWrite, fencingMiddleware } from '../../src/fencing/index.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';

describe('fencedUpdate on a real PostgreSQL', () => {
  let database: TestDatabase;
  let db: pg.Client;

  beforeAll(async () => {
    database = await createTestDatabase();
    db = new pg.Client({ connectionString: database.url });
    await db.connect();
    await db.query(`CREATE TABLE inventory (product text PRIMARY KEY, units integer NOT NULL, fence ${FENCE_COLUMN_TYPE})`);
    await db.query(`INSERT INTO inventory VALUES ('sku-1', 3, 0)`);
  });

  afterAll(async () => {
    await db?.end();
    await database?.drop();
  });

  const buy = (token: number) =>
    fencedUpdate(db, {
      table: 'inventory',
      key: { column: 'product', value: 'sku-1' },
      fencingToken: token,
      set: 'units = units - $1',
      where: 'units >= $1',
      values: [1],
    });

  it('applies writes whose token is at least the highest seen, refuses lower ones and says why', async () => {
    expect(await buy(1_796_032_362_216_238)).toMatchObject({ applied: true });
    // The same lease may write again.
    expect(await buy(1_796_032_362_216_238)).toMatchObject({ applied: true });
    expect(await buy(1_796_032_362_216_100)).toEqual({ applied: false, reason: 'stale_token', highestSeen: 1_796_032_362_216_238 });
    expect(await buy(1_796_032_362_216_300)).toMatchObject({ applied: true });
    // Sold out: the token was fine, the condition was not.
    expect(await buy(1_796_032_362_216_400)).toEqual({ applied: false, reason: 'condition_failed' });
    const { rows } = await db.query<{ units: number; fence: string }>(`SELECT units, fence FROM inventory`);
    expect(rows).toEqual([{ units: 0, fence: '1796032362216300' }]);
  });

  it('refuses tokens that are not safe integers and names that are not identifiers', async () => {
    await expect(buy(2 ** 53)).rejects.toThrow(RangeError);
    await expect(
      fencedUpdate(db, { table: '', key: { column: 'product', value: 'x' }, fencingToken: 1, set: 'units = 0' }),
    ).rejects.toThrow(/identifier/);
  });
});

describe('fencingMiddleware on a node:http server', () => {
  let server: Server;
  let base = '';
  const rejected: number[] = [];

  beforeAll(async () => {
    const register = new FenceRegister();
    const check = fencingMiddleware({ register, onRejected: (_resource, token) => rejected.push(token) });
    server = createServer((req, res) =>
      check(req, res, () => {
        void fencedWrite(req, res, () => 'written').then((outcome) => {
          if (outcome.committed) res.end(outcome.value);
        });
      }),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
  });

  const put = (path: string, token?: string) =>
    fetch(`${base}${path}`, { method: 'PUT', headers: token === undefined ? {} : { 'fencing-token': token } });

  it('passes the highest token and equal ones, refuses lower ones per resource with 409', async () => {
    expect((await put('/config', '10')).status).toBe(200);
    expect((await put('/config', '10')).status).toBe(200);
    const stale = await put('/config', '9');
    expect(stale.status).toBe(409);
    expect(stale.headers.get('content-type')).toBe('application/problem+json');
    expect(await stale.json()).toMatchObject({ code: 'stale_fencing_token', highestSeen: 10 });
    // Another resource has its own highest token.
    expect((await put('/other', '9')).status).toBe(200);
    expect(rejected).toEqual([9]);
  });

  it('answers 400 without a valid token', async () => {
    for (const token of [undefined, '', 'abc', '-1', '1.5', '99999999999999999']) {
      expect((await put('/config', token)).status, String(token)).toBe(400);
    }
  });
});
