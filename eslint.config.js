'use strict'

// ESLint with neostandard (standard style: no semicolons, 2 spaces, a space before
// function parentheses), lines up to 120 characters. Run: npm run lint (or npx eslint .)

const neostandard = require('neostandard')

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
    rules: {
      // max-len of ESLint's core is deprecated; the stylistic plugin neostandard loads
      // carries the same rule. A line holding a string, template or regex literal may be
      // longer: expected messages, log lines and patterns stay whole, so they can be
      // grepped (without these, ~400 lines of test/ and ~210 of lib/ would be split).
      '@stylistic/max-len': ['error', {
        code: 120,
        ignoreUrls: true,
        ignoreStrings: true,
        ignoreTemplateLiterals: true,
        ignoreRegExpLiterals: true
      }]
    }
  }
]
