// Package runid makes run ids: globally unique without a counter or a
// coordinator (DESIGN.md: runs of several machines and restarts end up in
// one query), readable, and ordered by creation time.
package runid

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// layout is the creation time in an id: UTC, to the second, with a
// lowercase 't' so that ids stay in the lowercase alphabet.
const layout = "20060102t150405"

// randomBytes is the randomness in an id: 48 bits.
const randomBytes = 6

// SuffixLen is the length in bytes of what New appends to its prefix: the
// time (15), "-" and the random part (12 hex digits). A caller that must
// keep ids within a maximum length (the evidence store's is 128) shortens
// its prefix by this much.
const SuffixLen = len(layout) + 1 + 2*randomBytes

// New returns prefix followed by t in UTC as "20060102t150405", "-" and 48
// bits from crypto/rand as 12 lowercase hex digits: with prefix "run-",
// "run-20261130t101500-0a1b2c3d4e5f". Ids with one prefix sort by the
// second they were made in; two made in the same second are equal with
// probability 2^-48. The id uses only [0-9a-z-] beyond the prefix. Safe for
// concurrent use.
//
// crypto/rand.Read does not fail (Go 1.24 and later: it ends the program
// instead, if the operating system has no randomness to give), so neither
// does New.
func New(prefix string, t time.Time) string {
	var b [randomBytes]byte
	_, _ = rand.Read(b[:])
	return prefix + t.UTC().Format(layout) + "-" + hex.EncodeToString(b[:])
}
