// The backend's persistence: one SQLite file (WAL) holding pets and orders, so the catalogue survives
// restarts. Statements are prepared once; every list is keyset-paged by id. A caller may wrap each
// prepared statement (tracing.ts does, to give every execution a span).
import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import type { SQLInputValue, StatementSync } from 'node:sqlite'
import type { NewPet, Order, OrderStatus, Pet, PetStatus } from '../interface/schemas.js'
import { DatabaseSync } from './sqlite.js'

const DEFAULT_BUSY_TIMEOUT_MS = 5000

const SCHEMA_SQL = `
CREATE TABLE IF NOT EXISTS pets (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  category_id INTEGER NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('available', 'pending', 'sold'))
);
CREATE INDEX IF NOT EXISTS pets_status_id ON pets (status, id);
CREATE TABLE IF NOT EXISTS orders (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  pet_id INTEGER NOT NULL REFERENCES pets (id),
  quantity INTEGER NOT NULL CHECK (quantity > 0),
  status TEXT NOT NULL CHECK (status IN ('placed', 'approved', 'delivered'))
);
`

export interface PetPage {
  limit: number
  afterId: number
  status?: PetStatus | undefined
}

export interface OrderPage {
  limit: number
  afterId: number
}

export interface NewOrder {
  petId: number
  quantity: number
  status: OrderStatus
}

export interface PetStore {
  createPet (pet: NewPet): Pet
  getPet (id: number): Pet | undefined
  /** Pets with id > afterId, ascending, at most `limit` of them. */
  listPets (page: PetPage): Pet[]
  /** Not reachable over HTTP: no public endpoint creates orders. Used to seed stores. */
  createOrder (order: NewOrder): Order
  /** Orders with id > afterId, ascending, at most `limit` of them. */
  listOrders (page: OrderPage): Order[]
  close (): void
}

type Row = Record<string, unknown>

/** What the store runs of a prepared statement (positional parameters only). */
export interface Statement {
  get: (...params: SQLInputValue[]) => unknown
  all: (...params: SQLInputValue[]) => unknown[]
}

export interface StoreOptions {
  /** Wraps each prepared statement (default: used as it is). */
  wrapStatement?: (statement: StatementSync) => Statement
}

// Rows come back with a null prototype and loosely typed columns; the interface's types are built here.
function toPet (row: Row): Pet {
  return { id: row.id as number, name: row.name as string, categoryId: row.categoryId as number, status: row.status as PetStatus }
}

function toOrder (row: Row): Order {
  return { id: row.id as number, petId: row.petId as number, quantity: row.quantity as number, status: row.status as OrderStatus }
}

/** Opens (and on first use creates) the store at `path`, creating missing parent directories. */
export function openStore (path: string, opts: StoreOptions = {}): PetStore {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true })
  const db = new DatabaseSync(path, { enableForeignKeyConstraints: true, timeout: DEFAULT_BUSY_TIMEOUT_MS })
  db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;')
  db.exec(SCHEMA_SQL)
  const wrap = opts.wrapStatement
  const prepare = (sql: string): Statement => wrap === undefined ? db.prepare(sql) : wrap(db.prepare(sql))

  const petColumns = 'id, name, category_id AS categoryId, status'
  const insertPet = prepare(
    `INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING ${petColumns}`)
  const selectPet = prepare(`SELECT ${petColumns} FROM pets WHERE id = ?`)
  const selectPets = prepare(
    `SELECT ${petColumns} FROM pets WHERE id > ? ORDER BY id LIMIT ?`)
  const selectPetsByStatus = prepare(
    `SELECT ${petColumns} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?`)
  const orderColumns = 'id, pet_id AS petId, quantity, status'
  const insertOrder = prepare(
    `INSERT INTO orders (pet_id, quantity, status) VALUES (?, ?, ?) RETURNING ${orderColumns}`)
  const selectOrders = prepare(
    `SELECT ${orderColumns} FROM orders WHERE id > ? ORDER BY id LIMIT ?`)

  return {
    createPet ({ name, categoryId, status }) {
      return toPet(insertPet.get(name, categoryId, status) as Row)
    },
    getPet (id) {
      const row = selectPet.get(id) as Row | undefined
      return row === undefined ? undefined : toPet(row)
    },
    listPets ({ limit, afterId, status }) {
      const rows = status === undefined
        ? selectPets.all(afterId, limit)
        : selectPetsByStatus.all(status, afterId, limit)
      return (rows as Row[]).map(toPet)
    },
    createOrder ({ petId, quantity, status }) {
      return toOrder(insertOrder.get(petId, quantity, status) as Row)
    },
    listOrders ({ limit, afterId }) {
      return (selectOrders.all(afterId, limit) as Row[]).map(toOrder)
    },
    close () {
      if (db.isOpen) db.close()
    }
  }
}
