package synth

// The category stage: what a row adds to its category's length model
// (catFit, lenState) and to the joint log depends on nothing the rest of
// classFit.add keeps, so it runs on a goroutine of its own, fed batches of
// rows in stream order. The length multisets of thousands of categories
// are probes into memory larger than the caches; on their own core they
// overlap the block lookups and the sessions instead of following them.
// The stage owns classFit's cats, lastCat, lastCN, overflow, all,
// collapsed, untracked and joint until the fitter syncs (model, close).

// catRow is what the category stage reads of a row.
type catRow struct {
	c       *classFit
	name    string // category
	row     lenRow
	derived bool // c.looksDerived() as of this row
	follow  bool // a session's row after its first
	input   int32
	output  int32
	reused  int32 // leading blocks reused; -1 = none counted
	blocks  int32
}

// catBatch is how many rows go to the stage at once.
const catBatch = 512

// catStage is the running stage, or nil.
type catStage struct {
	work chan []catRow
	free chan []catRow
	done chan struct{}
}

// queueCat hands a row to the category stage.
func (f *fitter) queueCat(r catRow) {
	if f.stage == nil {
		f.stage = &catStage{work: make(chan []catRow, 2), free: make(chan []catRow, 3), done: make(chan struct{})}
		for range 3 {
			f.stage.free <- make([]catRow, 0, catBatch)
		}
		f.catBuf = <-f.stage.free
		go f.stage.run(f)
	}
	f.catBuf = append(f.catBuf, r)
	if len(f.catBuf) == catBatch {
		f.stage.work <- f.catBuf
		f.catBuf = <-f.stage.free
	}
}

func (s *catStage) run(f *fitter) {
	defer close(s.done)
	for b := range s.work {
		for i := range b {
			b[i].c.addCat(f, &b[i])
			b[i] = catRow{} // drop the name
		}
		s.free <- b[:0]
	}
}

// syncCats waits until every queued row is in its category and stops the
// stage; the fitter's state is then all the caller's again.
func (f *fitter) syncCats() {
	s := f.stage
	if s == nil {
		return
	}
	if len(f.catBuf) > 0 {
		s.work <- f.catBuf
	}
	f.catBuf = nil
	close(s.work)
	<-s.done
	f.stage = nil
}

// addCat adds a row to its category and to the joint log.
func (c *classFit) addCat(f *fitter, r *catRow) {
	ct, pooled, id := c.category(f, r.name, r.derived)
	if ct != nil {
		ct.add(f, &r.row)
	} else {
		pooled.add(&r.row)
	}
	fu := uint64(0)
	if r.follow {
		fu = 1
	}
	c.joint.put(uint64(id)<<1 | fu)
	c.joint.put(uint64(r.input))
	c.joint.put(uint64(r.output))
	c.joint.put(uint64(r.reused + 1))
	if r.reused >= 0 {
		c.joint.put(uint64(r.blocks))
	}
}
