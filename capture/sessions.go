package capture

// sessionID names a session before the records stage numbers it: the
// in-memory hash of a session or user field (always odd), or for a chat
// conversation 2×(arrival position of its first request + 1), which is
// even. 0 is no session.
type sessionID uint64

// sessions is the sessions stage. Fed requests in arrival order, it finds
// each one's session: the session/user field when the log has one, else the
// chat conversation the request extends (its messages continue an earlier
// request's). Its state is, per chat request, one map entry from the hash of
// its whole message prefix to its conversation, and per session a count.
type sessions struct {
	mode    string
	convEnd map[uint64]sessionID
	count   map[sessionID]int32
}

func newSessions(mode string) *sessions {
	return &sessions{mode: mode, convEnd: map[uint64]sessionID{}, count: map[sessionID]int32{}}
}

// add returns the session of e, the request at arrival position pos, and
// drops e's message prefixes, which nothing later needs.
func (s *sessions) add(e *redacted, pos int) sessionID {
	id := s.find(e, pos)
	e.prefixes = nil
	if id != 0 {
		s.count[id]++
	}
	return id
}

func (s *sessions) find(e *redacted, pos int) sessionID {
	var id sessionID
	switch {
	case s.mode == SessionsNone:
	case e.sessKey != 0:
		id = sessionID(e.sessKey)
	case len(e.prefixes) > 0:
		// The longest earlier conversation this request extends, looking
		// no shorter than its system messages.
		for j := len(e.prefixes) - 2; j >= e.nSys && j >= 0; j-- {
			if p, ok := s.convEnd[e.prefixes[j]]; ok {
				id = p
				break
			}
		}
		if id == 0 {
			id = sessionID(2 * (uint64(pos) + 1))
		}
		s.convEnd[e.prefixes[len(e.prefixes)-1]] = id
	}
	return id
}

// kept reports whether session id has two or more requests: a single
// request is no session.
func (s *sessions) kept(id sessionID) bool { return id != 0 && s.count[id] >= 2 }
