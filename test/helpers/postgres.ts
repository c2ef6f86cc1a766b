import { randomBytes } from 'node:crypto';
import pg from 'pg';

/**
 * The PostgreSQL server tests use: KEYHOLDER_TEST_POSTGRES_URL, or the local one on its standard port.
 * Tests never touch existing databases: each creates its own, uniquely named, and drops it.
 */
export const POSTGRES_ADMIN_URL = process.env.KEYHOLDER_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  readonly url: string;
  readonly name: string;
  drop(): Promise<void>;
}

/** Creates an empty database named keyholder_test_<random>; fails (never skips) when PostgreSQL is not there. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `keyholder_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL, connectionTimeoutMillis: 5_000 });
  try {
    await admin.connect();
  } catch (err) {
    throw new Error(
      `PostgreSQL is not reachable at ${POSTGRES_ADMIN_URL} (${(err as Error).message}). These tests need a real one: ` +
        'install `postgresql` (Debian) and start it, or point KEYHOLDER_TEST_POSTGRES_URL at a server where the user may CREATE DATABASE.',
      { cause: err },
    );
  }
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(POSTGRES_ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    async drop() {
      const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
      await client.connect();
      try {
        // WITH (FORCE): a buyer process killed mid-test may still hold a connection.
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}
