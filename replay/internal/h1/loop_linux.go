//go:build linux

package h1

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Loop sends requests and reads their responses on the calling OS thread
// alone, on non-blocking sockets that Go's network poller never sees: a
// request costs no goroutine, no hand-off between threads and no wake-up
// of another thread. The thread waits for the next deadline and for
// responses in one place (Wait), so a response that arrives while a send
// is due soon is read after that send instead of waking the thread once
// more: each socket carries the kernel's receive timestamp, so the time a
// chunk reached the machine is known however late it is read.
//
// Every method except Close must be called from the one thread that drives
// the loop. Spare connections are dialed by a goroutine of the loop's own.
type Loop struct {
	// addrs are the host's addresses; the dialer tries them in turn, from
	// the last that worked (as net.Dial does, one at a time). own and
	// ownGood are the same for the loop's thread (connect).
	addrs   []syscall.Sockaddr
	good    int
	own     []syscall.Sockaddr
	ownGood int
	t0      time.Time
	ep      int // epoll instance of every connection, idle or busy

	byFD       []*lconn // by file descriptor
	idle       []*lconn // newest last
	busy       []*lconn // carrying a request
	buf        []byte   // receive buffer
	oob        [64]byte // control messages (the receive timestamp)
	evs        [128]epollEvent
	keep       []string // the client's KeepHeaders
	timeout    time.Duration
	nextExpire int64 // no busy request times out before this run offset
	noPwait2   bool
	idleN      atomic.Int64 // len(idle) plus fresh, for the dialer
	fresh      freshStack   // dialed, not yet taken in by the loop thread
	spare      atomic.Int64 // grows each time the pool runs dry (maxSpare)
	// The loop's thread wakes the dialer through a pipe that Go's network
	// poller watches, not a channel: a goroutine woken through a channel
	// is queued on the waker's P, which the loop's thread keeps (replay's
	// dispatcher yields it only to itself).
	wakeR      *os.File
	wakeW      int
	wantDial   atomic.Bool // a wake-up is in the pipe
	quit       chan struct{}
	dialerDone chan struct{}
	closeOnce  sync.Once
	// connects counts the connections the loop's thread started itself
	// (the pool was dry).
	connects int
}

type lconn struct {
	fd   int
	job  *LoopJob
	idx  int // in Loop.idle or Loop.busy
	used bool
	dead bool
	// connecting: connect started it for job, whose request is written
	// once it is up.
	connecting bool
	r          resp
}

// epollEvent is struct epoll_event in package syscall's layout for the
// architecture (packed on amd64).
type epollEvent = syscall.EpollEvent

const sysEpollPwait2 = 441 // the same number on every architecture

// maxSpare bounds how many idle connections a loop keeps ready as its
// spares grow.
const maxSpare = 512

// NewLoop returns a loop for the client's host whose requests time out
// after timeout. spare is how many idle connections its dialer keeps ready
// (it refills to twice as many); it starts dialing them now. The host name
// is resolved once, here. Call Start before Send.
func (h *Client) NewLoop(ctx context.Context, timeout time.Duration, spare int) (*Loop, error) {
	host, port, err := net.SplitHostPort(h.host)
	if err != nil {
		return nil, err
	}
	pn, err := net.DefaultResolver.LookupPort(ctx, "tcp", port)
	if err != nil {
		return nil, err
	}
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil || len(ips) == 0 {
		return nil, errors.New("h1: loop: cannot resolve " + host)
	}
	l := &Loop{timeout: timeout, buf: make([]byte, 64<<10), keep: slices.Clone(h.keep),
		quit: make(chan struct{}), dialerDone: make(chan struct{})}
	l.spare.Store(int64(max(spare, 1)))
	l.nextExpire = math.MaxInt64
	for _, ip := range ips {
		// Two of each: Connect writes into them, and the dialer and the
		// loop's thread (connect) both connect.
		if ip4 := ip.IP.To4(); ip4 != nil {
			a := &syscall.SockaddrInet4{Port: pn}
			copy(a.Addr[:], ip4)
			b := *a
			l.addrs, l.own = append(l.addrs, a), append(l.own, &b)
		} else if ip.Zone == "" {
			a := &syscall.SockaddrInet6{Port: pn}
			copy(a.Addr[:], ip.IP.To16())
			b := *a
			l.addrs, l.own = append(l.addrs, a), append(l.own, &b)
		}
	}
	if len(l.addrs) == 0 {
		return nil, errors.New("h1: loop: no usable address for " + host)
	}
	var p [2]int
	if err = syscall.Pipe2(p[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		return nil, err
	}
	l.wakeR, l.wakeW = os.NewFile(uintptr(p[0]), "h1-loop-wake"), p[1]
	if l.ep, err = syscall.EpollCreate1(syscall.EPOLL_CLOEXEC); err != nil {
		l.wakeR.Close()
		syscall.Close(l.wakeW)
		return nil, err
	}
	go l.dialer()
	l.wakeDialer()
	return l, nil
}

// Start sets the run's start: times handed to handlers are offsets from t0.
func (l *Loop) Start(t0 time.Time) { l.t0 = t0 }

// now is the run offset of this moment.
func (l *Loop) now() int64 { return int64(time.Since(l.t0)) }

// Inflight is how many requests await their response.
func (l *Loop) Inflight() int { return len(l.busy) }

// dial opens a non-blocking connection to one of the host's addresses,
// the last that worked first.
func (l *Loop) dial() (fd int, err error) {
	for i := range l.addrs {
		k := (l.good + i) % len(l.addrs)
		if fd, err = l.dialAddr(l.addrs[k]); err == nil {
			l.good = k
			return fd, nil
		}
	}
	return -1, err
}

// dialAddr opens a non-blocking connection with the socket options
// net.Dial sets (no delay, keep-alive) plus receive timestamps.
func (l *Loop) dialAddr(addr syscall.Sockaddr) (int, error) {
	fd, err := socketFor(addr)
	if err != nil {
		return -1, err
	}
	err = syscall.Connect(fd, addr)
	if err == syscall.EINPROGRESS {
		pfd := [1]pollFd{{fd: int32(fd), events: pollOut}}
		ts := syscall.NsecToTimespec(int64(5 * time.Second))
		n, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		switch {
		case e != 0:
			err = e
		case n == 0:
			err = errTimeout
		default:
			var soErr int
			if soErr, err = syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ERROR); err == nil && soErr != 0 {
				err = syscall.Errno(soErr)
			}
		}
	}
	if err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

// socketFor makes a non-blocking socket for addr with the options
// net.Dial sets (no delay, keep-alive) plus receive timestamps.
func socketFor(addr syscall.Sockaddr) (int, error) {
	fam := syscall.AF_INET
	if _, ok := addr.(*syscall.SockaddrInet6); ok {
		fam = syscall.AF_INET6
	}
	fd, err := rawSocket(fam)
	if err != nil {
		return -1, err
	}
	rawSetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
	rawSetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_KEEPALIVE, 1)
	rawSetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE, 30)
	rawSetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL, 30)
	rawSetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	return fd, nil
}

// connect starts a connection for a request that found no idle one,
// without waiting for it: the request is written once it is up (Wait).
// nil when no address takes the attempt.
func (l *Loop) connect() *lconn {
	for i := range l.own {
		k := (l.ownGood + i) % len(l.own)
		fd, err := socketFor(l.own[k])
		if err != nil {
			return nil
		}
		if err = rawConnect(fd, l.own[k]); err != nil && err != syscall.EINPROGRESS {
			rawClose(fd)
			continue
		}
		ev := epollEvent{Events: syscall.EPOLLOUT | syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(fd)}
		if rawEpollCtl(l.ep, syscall.EPOLL_CTL_ADD, fd, &ev) != nil {
			rawClose(fd)
			return nil
		}
		l.ownGood = k
		for len(l.byFD) <= fd {
			l.byFD = append(l.byFD, nil)
		}
		c := &lconn{fd: fd, connecting: true}
		l.byFD[fd] = c
		l.connects++
		return c
	}
	return nil
}

// connected writes the request of c, a connection connect started, now
// that it is up, or fails it.
func (l *Loop) connected(c *lconn) {
	c.connecting = false
	soErr, err := rawGetsockoptInt(c.fd, syscall.SOL_SOCKET, syscall.SO_ERROR)
	if err == nil && soErr != 0 {
		err = syscall.Errno(soErr)
	}
	if err == nil {
		ev := epollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(c.fd)}
		err = rawEpollCtl(l.ep, syscall.EPOLL_CTL_MOD, c.fd, &ev)
	}
	if err == nil {
		err = l.write(c.fd, c.job.req, c.job.deadline)
	}
	if err != nil {
		l.fail(c, err)
	}
}

type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

const pollOut = 0x4

// dialer keeps spare connections ready: whenever the loop thread finds
// spare or fewer idle, it dials up to twice as many (spare doubles, up to
// maxSpare, each time the pool runs dry). A failed dial gives
// up until the next request.
func (l *Loop) dialer() {
	defer close(l.dialerDone)
	buf := make([]byte, 64)
	for {
		if _, err := l.wakeR.Read(buf); err != nil {
			return // Close closed the pipe
		}
		l.wantDial.Store(false)
		for l.idleN.Load() < 2*l.spare.Load() {
			fd, err := l.dial()
			if err != nil {
				break
			}
			select {
			case <-l.quit:
				syscall.Close(fd)
				return
			default:
			}
			l.idleN.Add(1)
			l.fresh.push(fd)
			// One connection at a time, then whatever waits for this P
			// runs: woken by the pipe, the dialer may be on the P of
			// replay's dispatcher, queued behind it (an execution trace
			// showed it dialing 20 ms on end there).
			runtime.Gosched()
		}
	}
}

// wakeDialer has the dialer dial spares, unless a wake-up is pending.
func (l *Loop) wakeDialer() {
	if l.wantDial.CompareAndSwap(false, true) {
		one := [1]byte{1}
		syscall.RawSyscall(syscall.SYS_WRITE, uintptr(l.wakeW), uintptr(unsafe.Pointer(&one[0])), 1)
	}
}

// take registers the connections the dialer made.
func (l *Loop) take() {
	for fd := l.fresh.popAll(); fd != nil; fd = fd.next {
		c := &lconn{fd: fd.fd}
		ev := epollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(fd.fd)}
		if err := rawEpollCtl(l.ep, syscall.EPOLL_CTL_ADD, fd.fd, &ev); err != nil {
			rawClose(fd.fd)
			l.idleN.Add(-1)
			continue
		}
		for len(l.byFD) <= fd.fd {
			l.byFD = append(l.byFD, nil)
		}
		l.byFD[fd.fd] = c
		c.idx = len(l.idle)
		l.idle = append(l.idle, c)
	}
}

func (l *Loop) popIdle() *lconn {
	if spare := l.spare.Load(); int64(len(l.idle)) <= spare {
		l.take()
		if int64(len(l.idle)) <= spare {
			l.wakeDialer()
		}
	}
	n := len(l.idle)
	if n == 0 {
		// Dry: a burst (after a stall, or of the trace's own) needed more
		// connections than were kept ready, and this request waits for a
		// connection of its own (Send). Keep more ready for the next one
		// (not when the dialer is merely behind: at the start, or after
		// failures).
		if spare := l.spare.Load(); spare < maxSpare && int64(len(l.busy)) >= spare {
			l.spare.Store(min(2*spare, maxSpare))
		}
		return nil
	}
	c := l.idle[n-1]
	l.idle = l.idle[:n-1]
	l.idleN.Add(-1)
	return c
}

// Send writes j's request on an idle connection, or when none is idle
// starts a connection and writes it once the connection is up (Wait), and
// returns true; false, having done nothing, when no connection could be
// started (the caller sends it another way). Done is called later, from
// Wait, Expire or Abandon.
func (l *Loop) Send(j *LoopJob) bool {
	for {
		c := l.popIdle()
		if c == nil {
			if c = l.connect(); c == nil {
				return false
			}
		}
		if j.attempt == 0 {
			j.Sent = l.now()
			j.deadline = j.Sent + int64(l.timeout)
		}
		if c.connecting {
			l.busyWith(c, j)
			return true
		}
		if err := l.write(c.fd, j.req, j.deadline); err != nil {
			// The server closed it while idle (we have not read the close
			// yet): the request never got there, try another.
			l.close(c)
			continue
		}
		l.busyWith(c, j)
		return true
	}
}

// busyWith makes c carry j.
func (l *Loop) busyWith(c *lconn, j *LoopJob) {
	c.job = j
	l.nextExpire = min(l.nextExpire, j.deadline)
	c.r = resp{carry: c.r.carry[:0], keep: l.keep}
	c.idx = len(l.busy)
	l.busy = append(l.busy, c)
}

// Connects is how many connections the loop's thread started itself,
// finding none idle.
func (l *Loop) Connects() int { return l.connects }

// write writes b whole, waiting for room in the socket when it is full.
func (l *Loop) write(fd int, b []byte, deadline int64) error {
	for len(b) > 0 {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch {
		case e == syscall.EAGAIN:
			rem := deadline - l.now()
			if rem <= 0 {
				return errTimeout
			}
			pfd := [1]pollFd{{fd: int32(fd), events: pollOut}}
			ts := syscall.NsecToTimespec(min(rem, int64(time.Second)))
			syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		case e != 0:
			return e
		default:
			b = b[n:]
		}
	}
	return nil
}

// Wait waits up to d for responses (0: only what is there already) and
// reads every connection that has something. With keepP the wait keeps
// the goroutine's P (a raw system call): for short waits right before a
// deadline, as the dispatcher's own sleep does.
func (l *Loop) Wait(d time.Duration, keepP bool) {
	var n int
	var e syscall.Errno
	switch {
	case d <= 0:
		var r uintptr
		r, _, e = syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(l.ep), uintptr(unsafe.Pointer(&l.evs[0])), uintptr(len(l.evs)), 0, 0, 0)
		n = int(r)
	case l.noPwait2:
		// Millisecond waits only: sleep off the rest, then look.
		ms := int(d / time.Millisecond)
		if ms == 0 {
			ts := syscall.NsecToTimespec(int64(d))
			syscall.Syscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
		}
		var r uintptr
		r, _, e = syscall.Syscall6(syscall.SYS_EPOLL_PWAIT, uintptr(l.ep), uintptr(unsafe.Pointer(&l.evs[0])), uintptr(len(l.evs)), uintptr(ms), 0, 0)
		n = int(r)
	default:
		ts := syscall.NsecToTimespec(int64(d))
		call := syscall.Syscall6
		if keepP {
			call = syscall.RawSyscall6
		}
		var r uintptr
		r, _, e = call(sysEpollPwait2, uintptr(l.ep), uintptr(unsafe.Pointer(&l.evs[0])), uintptr(len(l.evs)), uintptr(unsafe.Pointer(&ts)), 0, 0)
		n = int(r)
		if e == syscall.ENOSYS {
			l.noPwait2 = true
			return
		}
	}
	if e != 0 {
		n = 0
	}
	for i := 0; i < n; i++ {
		fd := int(l.evs[i].Fd)
		if fd < len(l.byFD) {
			if c := l.byFD[fd]; c != nil {
				if c.connecting {
					l.connected(c)
				} else {
					l.read(c)
				}
			}
		}
	}
	if now := l.now(); now >= l.nextExpire {
		l.nextExpire = l.expire(now)
	}
}

// read reads what c has, up to 4 buffers at a time (the rest waits for
// the next Wait), and parses it.
func (l *Loop) read(c *lconn) {
	for range 4 {
		if c.dead {
			return
		}
		var iov syscall.Iovec
		iov.Base = &l.buf[0]
		iov.SetLen(len(l.buf))
		msg := syscall.Msghdr{Iov: &iov, Iovlen: 1, Control: &l.oob[0]}
		msg.SetControllen(len(l.oob))
		n, _, e := syscall.RawSyscall(syscall.SYS_RECVMSG, uintptr(c.fd), uintptr(unsafe.Pointer(&msg)), 0)
		if e == syscall.EAGAIN || e == syscall.EINTR {
			return
		}
		now := time.Now()
		nowOff := int64(now.Sub(l.t0))
		if c.job == nil {
			// Idle: the server closed it or sent what nobody asked for.
			l.close(c)
			return
		}
		if e != 0 {
			l.fail(c, e)
			return
		}
		if n == 0 {
			if c.r.eof() {
				l.finish(c, nil, false)
			} else {
				l.fail(c, io.EOF)
			}
			return
		}
		at := runOffset(rxTimestamp(l.oob[:msg.Controllen]), now, nowOff, c.job.Sent)
		done, rest, err := c.r.feed(l.buf[:n], at, c.job.h)
		switch {
		case err != nil:
			l.fail(c, err)
			return
		case done:
			l.finish(c, nil, !rest && c.r.hd.reuse)
			return
		}
		if int(n) < len(l.buf) {
			return
		}
	}
}

// rxTimestamp finds SCM_TIMESTAMPNS in control messages: the time
// (CLOCK_REALTIME, ns) the last bytes read reached the socket; 0 if none.
func rxTimestamp(oob []byte) int64 {
	for len(oob) >= syscall.SizeofCmsghdr {
		h := (*syscall.Cmsghdr)(unsafe.Pointer(&oob[0]))
		if h.Len < syscall.SizeofCmsghdr || int(h.Len) > len(oob) {
			return 0
		}
		if h.Level == syscall.SOL_SOCKET && h.Type == syscall.SCM_TIMESTAMPNS && int(h.Len) >= syscall.SizeofCmsghdr+16 {
			ts := (*syscall.Timespec)(unsafe.Pointer(&oob[syscall.SizeofCmsghdr]))
			return ts.Nano()
		}
		oob = oob[cmsgAlign(int(h.Len)):]
	}
	return 0
}

func cmsgAlign(n int) int { return (n + 7) &^ 7 }

// fail ends c's request with err. A reused connection the server closed
// before any byte of the response (it had timed it out as we wrote) is
// retried on another, twice at most: the request never reached it.
func (l *Loop) fail(c *lconn, err error) {
	j := c.job
	stale := c.used && !c.r.got && (err == io.EOF || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE))
	l.unbusy(c)
	l.close(c)
	if stale && j.attempt < 2 {
		j.attempt++
		if l.Send(j) {
			return
		}
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	j.h.Done(err)
}

// finish ends c's request whole; c goes back to the pool when reusable.
func (l *Loop) finish(c *lconn, err error, reuse bool) {
	j := c.job
	l.unbusy(c)
	if reuse {
		c.used = true
		c.idx = len(l.idle)
		l.idle = append(l.idle, c)
		l.idleN.Add(1)
	} else {
		l.close(c)
	}
	j.h.Done(err)
}

func (l *Loop) unbusy(c *lconn) {
	last := l.busy[len(l.busy)-1]
	l.busy[c.idx] = last
	last.idx = c.idx
	l.busy = l.busy[:len(l.busy)-1]
	c.job = nil
}

// close closes c, busy or not (a busy one must be unbusied first); an
// idle one leaves the pool.
func (l *Loop) close(c *lconn) {
	if c.dead {
		return
	}
	c.dead = true
	if c.job == nil && c.idx < len(l.idle) && l.idle[c.idx] == c {
		last := l.idle[len(l.idle)-1]
		l.idle[c.idx] = last
		last.idx = c.idx
		l.idle = l.idle[:len(l.idle)-1]
		l.idleN.Add(-1)
	}
	l.byFD[c.fd] = nil
	rawClose(c.fd) // also leaves the epoll set
}

// expire fails the requests past their timeout and returns the earliest
// deadline of the others.
func (l *Loop) expire(now int64) (next int64) {
	next = math.MaxInt64
	for i := 0; i < len(l.busy); {
		c := l.busy[i]
		if c.job.deadline > now {
			next = min(next, c.job.deadline)
			i++
			continue
		}
		j := c.job
		l.unbusy(c)
		l.close(c)
		j.h.Done(errTimeout)
	}
	return next
}

// Abandon ends every request in flight with err, closing its connection.
func (l *Loop) Abandon(err error) {
	for len(l.busy) > 0 {
		c := l.busy[len(l.busy)-1]
		j := c.job
		l.unbusy(c)
		l.close(c)
		j.h.Done(err)
	}
}

// Close stops the dialer and closes every connection; requests still in
// flight get Done(net.ErrClosed). Call it from the loop's thread, once it
// drives the loop no more.
func (l *Loop) Close() {
	l.closeOnce.Do(func() {
		close(l.quit)
		syscall.Close(l.wakeW) // the dialer reads the end of the pipe
		<-l.dialerDone
		l.wakeR.Close()
		l.Abandon(net.ErrClosed)
		l.take()
		for len(l.idle) > 0 {
			l.close(l.idle[len(l.idle)-1])
		}
		syscall.Close(l.ep)
	})
}

// freshStack hands dialed connections from the dialer to the loop thread
// without a lock (the loop thread runs real-time: see idleStack).
type freshStack struct{ head atomic.Pointer[freshNode] }

type freshNode struct {
	fd   int
	next *freshNode
}

func (s *freshStack) push(fd int) {
	n := &freshNode{fd: fd}
	for {
		n.next = s.head.Load()
		if s.head.CompareAndSwap(n.next, n) {
			return
		}
	}
}

func (s *freshStack) popAll() *freshNode { return s.head.Swap(nil) }
