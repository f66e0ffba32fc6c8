import t from 'tap'
import { DatabaseSync } from '../../src/backend/sqlite.js'
import { openStore } from '../../src/backend/store.js'

t.test('opening creates the parent directories, the tables and a WAL journal', async (t) => {
  const dbPath = `${t.testdir()}/a/b/pets.db`
  const store = openStore(dbPath)
  t.teardown(() => store.close())
  t.strictSame(store.listPets({ limit: 10, afterId: 0 }), [])
  t.strictSame(store.listOrders({ limit: 10, afterId: 0 }), [])
  const db = new DatabaseSync(dbPath, { readOnly: true })
  t.teardown(() => db.close())
  t.equal(db.prepare('PRAGMA journal_mode').get()?.journal_mode, 'wal')
  const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all()
  t.strictSame(tables.map((r) => String(r.name)).filter((n) => !n.startsWith('sqlite_')), ['orders', 'pets'])
})

t.test('list functions page by afterId and filter by status', async (t) => {
  const store = openStore(':memory:')
  t.teardown(() => store.close())
  const a = store.createPet({ name: 'a', categoryId: 1, status: 'available' })
  const b = store.createPet({ name: 'b', categoryId: 2, status: 'sold' })
  const c = store.createPet({ name: 'c', categoryId: 3, status: 'available' })
  t.strictSame(store.listPets({ limit: 2, afterId: 0 }), [a, b])
  t.strictSame(store.listPets({ limit: 2, afterId: b.id }), [c])
  t.strictSame(store.listPets({ limit: 5, afterId: 0, status: 'available' }), [a, c])
  t.strictSame(store.listPets({ limit: 5, afterId: a.id, status: 'available' }), [c])
  t.strictSame(store.getPet(b.id), { id: 2, name: 'b', categoryId: 2, status: 'sold' })
  t.equal(store.getPet(99), undefined)
  const o = store.createOrder({ petId: a.id, quantity: 2, status: 'approved' })
  t.strictSame(o, { id: 1, petId: 1, quantity: 2, status: 'approved' })
  t.strictSame(store.listOrders({ limit: 1, afterId: 0 }), [o])
  t.strictSame(store.listOrders({ limit: 1, afterId: 1 }), [])
})

t.test('the tables refuse invalid rows', async (t) => {
  const store = openStore(':memory:')
  t.teardown(() => store.close())
  t.throws(() => store.createOrder({ petId: 404, quantity: 1, status: 'placed' }), /FOREIGN KEY/)
  const pet = store.createPet({ name: 'a', categoryId: 1, status: 'available' })
  t.throws(() => store.createOrder({ petId: pet.id, quantity: 0, status: 'placed' }), /CHECK/)
})

t.test('close is idempotent', async (t) => {
  const store = openStore(':memory:')
  store.close()
  t.doesNotThrow(() => store.close())
})
