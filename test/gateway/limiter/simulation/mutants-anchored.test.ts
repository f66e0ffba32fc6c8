// The mutation gate (`npm run sim:mutants`, test/helpers/sim/mutants.ts) plants each of its bugs by an exact
// text replacement in the production Redis path. A change to that code can move the text a mutant is
// anchored on; the gate then reports it STALE, but only when someone runs it. This checks every anchor on
// every `npm test`, in milliseconds: each mutant's text occurs exactly once in its file, and its
// replacement changes the file (so no mutant is silently a no-op).
import { readFileSync } from 'node:fs'
import t from 'tap'
import { MUTANTS } from '../../../helpers/sim/mutants.js'

t.ok(MUTANTS.length >= 10, `the gate holds ${MUTANTS.length} mutants (at least 10)`)
t.equal(new Set(MUTANTS.map((mutant) => mutant.name)).size, MUTANTS.length, 'mutant names are unique')

for (const mutant of MUTANTS) {
  const source = readFileSync(mutant.file, 'utf8')
  const occurrences = source.split(mutant.find).length - 1
  t.equal(occurrences, 1, `${mutant.name}: its anchor occurs exactly once in ${mutant.file}`)
  t.not(mutant.replace, mutant.find, `${mutant.name}: its replacement changes the code`)
}
