'use strict'

// `lila completion bash|zsh`: a shell completion script made from the OPTIONS table
// and the modes, so that it knows every option lila knows and every topic of lila
// help. zsh loads the bash one through bashcompinit.
//   bash: source <(lila completion bash)      zsh: source <(lila completion zsh)

const { OPTIONS, GROUPS } = require('../config/options')
const { MODES } = require('../upstream/balancers')
const { LOG_LEVELS, ACCESS_LOG_FORMATS } = require('../config/parsers')
const { UsageError } = require('../errors')

const SHELLS = ['bash', 'zsh']
const COMMANDS = ['run', 'demo', 'help', 'version', 'completion', 'upgrade', 'restart-app']
const TOPICS = [...GROUPS.map(g => g.name), 'all'] // what `lila help` takes

// The words an option's value may be, when it is one of a few; 'FILE' for a path.
function choicesOf (option) {
  if (option.type === 'file') return 'FILE'
  if (option.type === 'logLevel') return LOG_LEVELS
  if (option.type === 'accessLog') return ACCESS_LOG_FORMATS
  const words = (option.arg || '').replace(/[[\]]/g, '')
  return words.includes('|') ? words.split('|').filter(w => /^[a-z0-9]+$/.test(w)) : null
}

function bashScript () {
  const flags = OPTIONS.map(o => o.flag).join(' ')
  const firsts = [...MODES.flatMap(m => [m.name, ...m.aliases]), ...COMMANDS].join(' ')
  const cases = []
  for (const option of OPTIONS) {
    const choices = choicesOf(option)
    if (choices === 'FILE') cases.push(`    ${option.flag}) COMPREPLY=($(compgen -f -- "$cur")); return ;;`)
    else if (choices !== null) {
      cases.push(`    ${option.flag}) COMPREPLY=($(compgen -W "${choices.join(' ')}" -- "$cur")); return ;;`)
    }
  }
  return `# lila completion for bash, made from lila's own options: source <(lila completion bash)
_lila () {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}"
  COMPREPLY=()
  case "$prev" in
${cases.join('\n')}
    completion) COMPREPLY=($(compgen -W "${SHELLS.join(' ')}" -- "$cur")); return ;;
    help) COMPREPLY=($(compgen -W "${TOPICS.join(' ')}" -- "$cur")); return ;;
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "${flags}" -- "$cur"))
  elif [[ $COMP_CWORD -eq 1 ]]; then
    COMPREPLY=($(compgen -W "${firsts}" -- "$cur"))
  fi
}
complete -o default -F _lila lila
`
}

// The script for `shell`, or a UsageError naming the shells there are.
function completionScript (shell) {
  if (shell === 'bash') return bashScript()
  if (shell === 'zsh') {
    return '# lila completion for zsh: source <(lila completion zsh)\n' +
      `autoload -U +X bashcompinit && bashcompinit\n${bashScript()}`
  }
  const given = shell === undefined ? 'no shell given' : `unknown shell ${JSON.stringify(shell)}`
  throw new UsageError(`${given} for lila completion: expected ${SHELLS.join(' or ')}`)
}

module.exports = { completionScript }
