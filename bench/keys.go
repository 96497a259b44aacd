package bench

import (
	"fmt"
	"math/rand/v2"
)

// keyGen produces record keys for one producer; not safe for concurrent
// use. Keys are preformatted so that producing allocates nothing for them.
type keyGen struct {
	dist string
	keys [][]byte
	rng  *rand.Rand
	zipf *rand.Zipf
	next int
}

// zipfS is the Zipf exponent: with 10,000 keys the hottest key takes
// about a tenth of the records.
const zipfS = 1.1

func newKeyGen(w Workload, seed uint64) *keyGen {
	g := &keyGen{dist: w.KeyDistribution, rng: rand.New(rand.NewPCG(seed, 0x5eed))}
	if g.dist == KeysNone {
		return g
	}
	g.keys = make([][]byte, w.KeySpace)
	for i := range g.keys {
		g.keys[i] = fmt.Appendf(nil, "key-%08d", i)
	}
	g.next = int(seed % uint64(w.KeySpace))
	if g.dist == KeysZipf {
		g.zipf = rand.NewZipf(g.rng, zipfS, 1, uint64(w.KeySpace-1))
	}
	return g
}

// key returns the next key, nil for KeysNone.
func (g *keyGen) key() []byte {
	switch g.dist {
	case KeysRandom:
		return g.keys[g.rng.IntN(len(g.keys))]
	case KeysRoundRobin:
		k := g.keys[g.next]
		g.next = (g.next + 1) % len(g.keys)
		return k
	case KeysZipf:
		return g.keys[g.zipf.Uint64()]
	}
	return nil
}
