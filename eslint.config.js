'use strict'

// ESLint with neostandard (standard style: no semicolons, 2 spaces, a space before
// function parentheses), lines up to 120 characters. Run: npm run lint (or npx eslint .)

const neostandard = require('neostandard')

const MAX_LEN = { code: 120, ignoreUrls: true }

module.exports = [
  ...neostandard({
    ignores: [
      'lila', // the generated bundle (node scripts/build.js)
      'node_modules/**',
      'coverage/**',
      '.tap/**',
      'bench/node_modules/**'
    ]
  }),
  {
    // max-len of ESLint's core is deprecated; the stylistic plugin neostandard loads
    // carries the same rule. In lib/ (what ships): every line.
    rules: { '@stylistic/max-len': ['error', MAX_LEN] }
  },
  {
    // In tests and tooling a line holding a string, template or regex literal may be
    // longer: expected messages, log lines, configs and patterns stay whole, so that
    // they can be grepped.
    files: ['test/**', 'bench/**', 'scripts/**'],
    rules: {
      '@stylistic/max-len': ['error', {
        ...MAX_LEN,
        ignoreStrings: true,
        ignoreTemplateLiterals: true,
        ignoreRegExpLiterals: true
      }]
    }
  }
]
