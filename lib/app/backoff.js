'use strict'

// When an instance that exited is started again, and when its exits are a crash loop
// (pure; as an OTP supervisor's restart policy, data in one place): the first restart
// comes after FIRST_DELAY, each further one after twice the one before, up to
// MAX_DELAY; an instance that stayed ready for STAYED_UP starts over from FIRST_DELAY.
// LOOP_AFTER exits in a row without staying up are a crash loop, said once (its later
// exits are not said one by one) until the instance stays up again.
const FIRST_DELAY = 100
const MAX_DELAY = 30000
const STAYED_UP = 10000
const LOOP_AFTER = 5

class Backoff {
  constructor () {
    this.streak = 0 // exits in a row without staying up
    this.looping = false
  }

  // The instance exited after being ready for `upFor` ms (0: never ready).
  // -> { delay, loopBegan }: when to start it again; loopBegan is true once, when its
  // exits became a crash loop.
  exited (upFor) {
    if (upFor >= STAYED_UP) {
      this.streak = 0
      this.looping = false
    }
    const delay = Math.min(MAX_DELAY, FIRST_DELAY * 2 ** this.streak)
    this.streak++
    const loopBegan = !this.looping && this.streak >= LOOP_AFTER
    if (loopBegan) this.looping = true
    return { delay, loopBegan }
  }

  // It stayed up: the next exit starts over. Returns true when it was looping.
  stayedUp () {
    const was = this.looping
    this.streak = 0
    this.looping = false
    return was
  }
}

module.exports = { Backoff, STAYED_UP, MAX_DELAY }
