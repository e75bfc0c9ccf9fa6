// Package u64map is a hash map from uint64 keys to int32 values for the
// simulator's hot paths (the engines' prefix caches, a fleet router's
// prefix index): open addressing with linear probing and backward-shift
// deletion, key and value side by side so a lookup usually touches one
// cache line. Go's map costs about twice as much there, where the tables
// of a large fleet outgrow the CPU's caches.
package u64map

import "math/bits"

type slot struct {
	key uint64
	val int32
	// used marks a filled slot (any key, 0 included, is valid).
	used bool
}

// Map maps uint64 keys to int32 values. The zero value is an empty map
// ready to use. It is not safe for concurrent use.
type Map struct {
	slots []slot
	n     int
	shift uint8 // 64 − log2(len(slots))
}

// New returns a map sized for about n keys.
func New(n int) *Map {
	m := &Map{}
	m.resize(max(8, 2*n))
	return m
}

func (m *Map) resize(want int) {
	size := 1 << bits.Len(uint(want-1))
	old := m.slots
	m.slots = make([]slot, size)
	m.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	m.n = 0
	for _, s := range old {
		if s.used {
			m.Put(s.key, s.val)
		}
	}
}

// home is key's first slot (Fibonacci hashing, so keys that are not
// well mixed still spread).
func (m *Map) home(key uint64) int { return int((key * 0x9E3779B97F4A7C15) >> m.shift) }

// Len is the number of keys.
func (m *Map) Len() int { return m.n }

// Get returns key's value and whether it is there.
func (m *Map) Get(key uint64) (int32, bool) {
	if m.n == 0 {
		return 0, false
	}
	mask := len(m.slots) - 1
	for i := m.home(key); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if !s.used {
			return 0, false
		}
		if s.key == key {
			return s.val, true
		}
	}
}

// Put sets key's value.
func (m *Map) Put(key uint64, val int32) {
	v, _ := m.Upsert(key)
	*v = val
}

// Upsert makes sure key is there (with value 0 when it was not) and
// returns a pointer to its value, valid until the map next changes, and
// whether key was there: one probe where Get then Put take two.
func (m *Map) Upsert(key uint64) (val *int32, existed bool) {
	if 2*(m.n+1) > len(m.slots) {
		m.resize(max(8, 2*len(m.slots)))
	}
	mask := len(m.slots) - 1
	for i := m.home(key); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if !s.used {
			*s = slot{key: key, used: true}
			m.n++
			return &s.val, false
		}
		if s.key == key {
			return &s.val, true
		}
	}
}

// Delete removes key, moving back the keys probed past it so no
// tombstone is left.
func (m *Map) Delete(key uint64) { m.delete(key, false, 0) }

// DeleteIf removes key when its value is val.
func (m *Map) DeleteIf(key uint64, val int32) { m.delete(key, true, val) }

func (m *Map) delete(key uint64, cond bool, val int32) {
	if m.n == 0 {
		return
	}
	mask := len(m.slots) - 1
	i := m.home(key)
	for {
		s := &m.slots[i]
		if !s.used {
			return
		}
		if s.key == key {
			if cond && s.val != val {
				return
			}
			break
		}
		i = (i + 1) & mask
	}
	// Backward shift: a later key moves into the hole unless its home
	// lies cyclically in (hole, its slot].
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		s := &m.slots[j]
		if !s.used {
			break
		}
		h := m.home(s.key)
		if (j-h)&mask >= (j-i)&mask {
			m.slots[i] = *s
			i = j
		}
	}
	m.slots[i] = slot{}
	m.n--
}
