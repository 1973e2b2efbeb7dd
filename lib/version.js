module.exports = '0.1.0'
