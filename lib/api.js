'use strict'

// What `require('lila-lb')` gives: the single file is also the module (scripts/build.js
// loads this when the file is required, lib/cli/bin.js when it is run). Everything a
// program needs to run lila inside itself, as docs/api.md describes it.

const { createBalancer } = require('./index')
const { parseCommandLine } = require('./config/argv')
const { parseConfigFile, readConfigFile } = require('./config/file')
const { parseBackend } = require('./config/backend-spec')
const { createControl, controlFrom } = require('./admin/control')
const { createStatusServer } = require('./admin/status-server')
const { createAccessLog } = require('./admin/access-log')
const errors = require('./errors')
const VERSION = require('./version')

module.exports = {
  createBalancer,
  parseCommandLine,
  parseConfigFile,
  readConfigFile,
  parseBackend,
  createControl,
  controlFrom,
  createStatusServer,
  createAccessLog,
  errors,
  VERSION
}
