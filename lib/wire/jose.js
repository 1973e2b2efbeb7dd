'use strict'

// JOSE as ACME uses it (RFC 8555 6.2): a JWS in flattened JSON serialization, signed
// ES256 (an ECDSA P-256 key; the signature as r||s, RFC 7518 3.4), with the account's
// JWK or its key ID in the protected header; the JWK thumbprint (RFC 7638) that key
// authorizations are made of. Pure but for the signature's randomness.

const crypto = require('crypto')

const base64url = bytes => Buffer.from(bytes).toString('base64url')

// An EC public key as a JWK: { crv, kty, x, y } (only the members a thumbprint hashes).
function jwkOf (key) {
  const publicKey = key.type === 'public' ? key : crypto.createPublicKey(key)
  const { kty, crv, x, y } = publicKey.export({ format: 'jwk' })
  if (kty !== 'EC' || crv !== 'P-256') throw new TypeError('ACME accounts use ECDSA P-256 keys here')
  return { crv, kty, x, y }
}

// RFC 7638: SHA-256 over the required members, in lexicographic order, no spaces.
function thumbprint (jwk) {
  const canonical = JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y })
  return base64url(crypto.createHash('sha256').update(canonical).digest())
}

// { protected, payload, signature }. `payload` null: an empty one (ACME's POST-as-GET);
// `header`: { nonce, url } and either { jwk } or { kid }.
function sign (key, header, payload) {
  const protectedPart = base64url(JSON.stringify({ alg: 'ES256', ...header }))
  const payloadPart = payload === null ? '' : base64url(JSON.stringify(payload))
  const signature = crypto.sign('sha256', Buffer.from(`${protectedPart}.${payloadPart}`), {
    key,
    dsaEncoding: 'ieee-p1363'
  })
  return { protected: protectedPart, payload: payloadPart, signature: base64url(signature) }
}

// A challenge's key authorization (RFC 8555 8.1): token "." thumbprint.
const keyAuthorization = (token, jwk) => `${token}.${thumbprint(jwk)}`

module.exports = { base64url, jwkOf, thumbprint, sign, keyAuthorization }
