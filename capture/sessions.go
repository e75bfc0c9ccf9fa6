package capture

// sessionID names a session before the records stage numbers it: the
// in-memory hash of a session or user field (always odd), or for a chat
// conversation 2×(arrival position of its first request + 1), which is
// even. 0 is no session.
type sessionID uint64

// sessions is the sessions stage. Fed requests in arrival order, it finds
// each one's session: the session/user field when the log has one, else the
// chat conversation the request extends (its messages continue an earlier
// request's, which arrived at most Options.SessionIdle before). Its state
// is, per chat request of the last SessionIdle, one map entry from the hash
// of its whole message prefix to its conversation (about 60 bytes), and per
// session a count, which the records stage drops after its last request.
type sessions struct {
	mode    string
	idle    int64
	convEnd map[uint64]convEnd
	recent  []convAt // convEnd's insertions in arrival order, from head
	head    int
	count   map[sessionID]int32
}

type convEnd struct {
	id sessionID
	t  int64
}

type convAt struct {
	hash uint64
	t    int64
}

func newSessions(o Options) *sessions {
	return &sessions{mode: o.Sessions, idle: int64(o.SessionIdle), convEnd: map[uint64]convEnd{}, count: map[sessionID]int32{}}
}

// find returns the session of e, the request at arrival position pos.
func (s *sessions) find(e *redacted, pos int) sessionID {
	var id sessionID
	switch {
	case s.mode == SessionsNone:
	case e.sessKey != 0:
		id = sessionID(e.sessKey)
	case len(e.prefixes) > 0:
		s.expire(e.t)
		// The longest earlier conversation this request extends, looking
		// no shorter than its system messages.
		for j := len(e.prefixes) - 2; j >= e.nSys && j >= 0; j-- {
			if p, ok := s.convEnd[e.prefixes[j]]; ok {
				id = p.id
				break
			}
		}
		if id == 0 {
			id = sessionID(2 * (uint64(pos) + 1))
		}
		h := e.prefixes[len(e.prefixes)-1]
		s.convEnd[h] = convEnd{id: id, t: e.t}
		s.recent = append(s.recent, convAt{hash: h, t: e.t})
	}
	return id
}

// expire forgets the conversation ends older than SessionIdle before t.
func (s *sessions) expire(t int64) {
	limit := t - s.idle
	if limit > t {
		return // no limit this far back
	}
	for s.head < len(s.recent) && s.recent[s.head].t < limit {
		c := s.recent[s.head]
		if ce, ok := s.convEnd[c.hash]; ok && ce.t == c.t {
			delete(s.convEnd, c.hash)
		}
		s.head++
	}
	if s.head > 4096 && s.head > len(s.recent)/2 {
		s.recent = append(s.recent[:0], s.recent[s.head:]...)
		s.head = 0
	}
}

// kept reports whether session id has two or more requests: a single
// request is no session.
func (s *sessions) kept(id sessionID) bool { return id != 0 && s.count[id] >= 2 }

// done forgets session id after its last request.
func (s *sessions) done(id sessionID, turns int32) bool {
	if turns < s.count[id] {
		return false
	}
	delete(s.count, id)
	return true
}
