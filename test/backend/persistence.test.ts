import t from 'tap'
import { postJson, request, startBackend } from '../helpers/backend.js'

t.test('pets survive a backend restart and new ids keep increasing', async (t) => {
  const dir = t.testdir()
  const dbPath = `${dir}/nested/dir/pets.db`
  const first = await startBackend(t, { dbPath })
  const a = await request(`${first.url}/v1/pets`, postJson({ name: 'Rex', categoryId: 1 }))
  const b = await request(`${first.url}/v1/pets`, postJson({ name: 'Tom', categoryId: 2, status: 'sold' }))
  await first.close()

  const second = await startBackend(t, { dbPath })
  const list = await request(`${second.url}/v1/pets`)
  t.strictSame(list.body, [a.body, b.body])
  t.strictSame((await request(`${second.url}/v1/pets/2`)).body, { id: 2, name: 'Tom', categoryId: 2, status: 'sold' })
  const c = await request(`${second.url}/v1/pets`, postJson({ name: 'Max', categoryId: 3 }))
  t.equal(c.status, 201)
  t.strictSame(c.body, { id: 3, name: 'Max', categoryId: 3, status: 'available' })
  t.equal(c.headers.get('location'), '/v1/pets/3')
})

t.test('ids are never reused, even after the newest pet is gone', async (t) => {
  const { openStore } = await import('../../src/backend/store.js')
  const dbPath = `${t.testdir()}/pets.db`
  const store = openStore(dbPath)
  store.createPet({ name: 'a', categoryId: 1, status: 'available' })
  store.close()
  const { DatabaseSync } = await import('../../src/backend/sqlite.js')
  const db = new DatabaseSync(dbPath)
  db.exec('DELETE FROM pets')
  db.close()
  const backend = await startBackend(t, { dbPath })
  const res = await request(`${backend.url}/v1/pets`, postJson({ name: 'b', categoryId: 1 }))
  t.equal((res.body as { id: number }).id, 2)
})
