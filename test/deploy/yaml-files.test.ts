// Every YAML file the deployment ships parses: all documents, no duplicate keys.
import { relative } from 'node:path'
import t from 'tap'
import { DEPLOY, loadYaml, ROOT, walk } from '../helpers/deploy.js'

t.test('every YAML file under deploy/ parses (all documents, no duplicate keys)', async (t) => {
  const files = walk(DEPLOY).filter((p) => /\.ya?ml$/.test(p))
  t.ok(files.length >= 10, `found ${files.length} YAML files`)
  for (const file of files) {
    t.doesNotThrow(() => loadYaml(file), relative(ROOT, file))
  }
})
