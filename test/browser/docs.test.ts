// The docs page in a real browser: Debian's chromium, headless, driven by playwright-core. Loads
// /docs from a running stack, checks it renders the description without console errors or any
// request leaving the origin, then authorises with a demo key and runs "try it" on listPets.
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { chromium, type Browser, type Request } from 'playwright-core'
import t from 'tap'
import { startGateway } from '../helpers/gateway.js'
import { bearer, DEMO_KEYS } from '../helpers/config-fixture.js'

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const LAUNCH_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']
const ARTIFACTS = join(import.meta.dirname, '..', 'artifacts')

t.test('the docs page lists the four operations, marks getPet deprecated, and "try it" with a demo key returns 200', async (t) => {
  const gw = await startGateway(t)
  const created = await fetch(`${gw.url}/v1/pets`, {
    method: 'POST', headers: { ...bearer(DEMO_KEYS.pro), 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Rex', categoryId: 1 })
  })
  t.equal(created.status, 201)
  await created.arrayBuffer()

  const browser: Browser = await chromium.launch({ executablePath: CHROMIUM, args: LAUNCH_ARGS })
  t.teardown(() => browser.close())
  const page = await browser.newPage()
  const consoleErrors: string[] = []
  const requests: Request[] = []
  const failed: string[] = []
  page.on('console', (msg) => { if (msg.type() === 'error') consoleErrors.push(msg.text()) })
  page.on('pageerror', (err) => consoleErrors.push(err.message))
  page.on('request', (req) => requests.push(req))
  page.on('requestfailed', (req) => failed.push(`${req.url()} ${req.failure()?.errorText ?? ''}`))

  const response = await page.goto(`${gw.url}/docs`)
  t.equal(response?.status(), 200)
  await page.locator('.opblock').nth(3).waitFor()
  t.equal(await page.locator('.opblock').count(), 4)
  const operationIds = await page.locator('.opblock .opblock-summary-operation-id').allInnerTexts()
  t.same(operationIds.map((s) => s.trim()).sort(), ['createPet', 'getPet', 'listOrders', 'listPets'])
  t.same((await page.locator('.opblock-deprecated .opblock-summary-operation-id').allInnerTexts()).map((s) => s.trim()), ['getPet'])
  t.match(await page.locator('.info .title').innerText(), /Pet Store/)

  // Authorise with the bearer field, then "try it" on listPets.
  await page.locator('.auth-wrapper button.authorize').click()
  await page.locator('.modal-ux input').fill(DEMO_KEYS.free)
  await page.locator('.modal-ux button.authorize').click()
  await page.locator('.modal-ux button.btn-done').click()
  const listPets = page.locator('#operations-pets-listPets')
  await listPets.locator('.opblock-summary').click()
  await listPets.locator('button.execute').click()
  const status = listPets.locator('.live-responses-table .response .response-col_status').first()
  await status.waitFor()
  t.equal((await status.innerText()).trim(), '200')
  const live = await listPets.locator('.live-responses-table').first().innerText()
  t.match(live, /"name": "Rex"/, 'the body is shown')
  t.match(live, /x-ratelimit-remaining: 59/, 'and the rate-limit headers')

  const tryIt = requests.find((r) => new URL(r.url()).pathname === '/v1/pets')
  t.equal(tryIt?.method(), 'GET')
  t.equal(await tryIt?.headerValue('authorization'), `Bearer ${DEMO_KEYS.free}`)

  mkdirSync(ARTIFACTS, { recursive: true })
  await page.screenshot({ path: join(ARTIFACTS, 'docs.png'), fullPage: true })

  t.same(consoleErrors, [], 'no console errors')
  t.same(failed, [], 'no failed requests')
  t.same(requests.filter((r) => !r.url().startsWith(gw.url)).map((r) => r.url()), [], 'nothing loaded from another origin')
  t.same(requests.map((r) => new URL(r.url()).pathname), ['/docs', '/docs/static/swagger-ui.css', '/docs/static/swagger-ui-bundle.js', '/v1/openapi.json', '/v1/pets'],
    'a page load is four requests (outside the anonymous limit), then the try-it call')
})
