package emscripten

import (
	"context"
	"encoding/binary"
	"net/netip"
	"strconv"
	"strings"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/vfs"
	"github.com/tetratelabs/wazero/api"
)

// The sandbox has no network. Sockets exist only on an in-memory loopback
// inside one interpreter, which is what asyncio's event loop (its self-pipe is
// a socketpair) and socket.socketpair need. Connecting anywhere else fails
// with ENETUNREACH; name resolution finds only numeric addresses and
// localhost (see getaddrinfo).

const (
	afUnix  = 1
	afInet  = 2
	afInet6 = 10

	sockStream   = 1
	sockDgram    = 2
	sockNonblock = 0o4000
	sockCloexec  = 0o2000000

	solSocket = 1
)

type sockAddr struct {
	family uint16
	ip     [16]byte // IPv4 in the first 4 bytes
	port   uint16
}

func (a sockAddr) loopbackOrAny() bool {
	switch a.family {
	case afInet:
		return a.ip[0] == 127 || a.ip == [16]byte{}
	case afInet6:
		var lo [16]byte
		lo[15] = 1
		return a.ip == lo || a.ip == [16]byte{}
	}
	return false
}

func (a sockAddr) key() sockAddr {
	k := a
	if k.ip == [16]byte{} && k.family == afInet {
		k.ip = [16]byte{127, 0, 0, 1}
	}
	if k.ip == [16]byte{} && k.family == afInet6 {
		k.ip[15] = 1
	}
	return k
}

type network struct {
	listeners map[sockAddr]*socket
	nextPort  uint16
	bufs      bufferPool // the sockets' and the pipes'
}

// maxQueued bounds the connections waiting on a listener to be accepted
// (Linux's default somaxconn): past it, connect is refused.
const maxQueued = 4096

func newNetwork() *network { return &network{listeners: map[sockAddr]*socket{}, nextPort: 40000} }

type socket struct {
	net       *network
	family    uint16
	typ       int32
	local     sockAddr
	peer      sockAddr
	bound     bool
	listening bool
	queue     []*socket
	in, out   *buffer // connected stream: in is read, out is written
	peerSock  *socket
}

func (s *socket) Read(p []byte) (int, vfs.Errno) {
	if s.in == nil {
		return 0, ENOTCONN
	}
	return s.in.read(p)
}

func (s *socket) Write(p []byte) (int, vfs.Errno) {
	if s.out == nil {
		return 0, ENOTCONN
	}
	return s.out.write(p)
}

func (s *socket) Pread([]byte, int64) (int, vfs.Errno)  { return 0, ESPIPE }
func (s *socket) Pwrite([]byte, int64) (int, vfs.Errno) { return 0, ESPIPE }
func (s *socket) Lseek(int64, int) (int64, vfs.Errno)   { return 0, ESPIPE }
func (s *socket) Stat() (vfs.Stat, vfs.Errno) {
	return vfs.Stat{Mode: vfs.S_IFSOCK | 0o777, Nlink: 1, Blksize: 4096}, ESUCCESS
}

func (s *socket) Close() vfs.Errno {
	if s.listening && s.net.listeners[s.local.key()] == s {
		delete(s.net.listeners, s.local.key())
	}
	if s.in != nil {
		s.in.closeRead()
	}
	if s.out != nil {
		s.out.writeClosed = true
	}
	for _, q := range s.queue {
		q.Close()
	}
	s.queue = nil
	return ESUCCESS
}

func (s *socket) poll(events int16) int16 {
	var rev int16
	if s.listening {
		if len(s.queue) > 0 {
			rev |= pollIn
		}
		return rev
	}
	if s.in != nil {
		if len(s.in.data) > 0 || s.in.writeClosed {
			rev |= pollIn
		}
		if s.in.writeClosed {
			rev |= pollHup
		}
	}
	if s.out != nil && !s.out.readClosed && len(s.out.data) < bufferCap {
		rev |= pollOut
	}
	return rev
}

func (h *Host) sock(fd int32) (*socket, vfs.Errno) {
	e, ok := h.fds.get(fd)
	if !ok {
		return nil, EBADF
	}
	s, ok := e.d.s.(*socket)
	if !ok {
		return nil, ENOTSOCK
	}
	return s, ESUCCESS
}

func readSockAddr(m mem, p, n uint32) (sockAddr, vfs.Errno) {
	b, ok := m.bytes(p, n)
	if !ok || n < 2 {
		return sockAddr{}, EFAULT
	}
	a := sockAddr{family: binary.LittleEndian.Uint16(b)}
	switch a.family {
	case afInet:
		if n < 8 {
			return a, EINVAL
		}
		a.port = binary.BigEndian.Uint16(b[2:])
		copy(a.ip[:4], b[4:8])
	case afInet6:
		if n < 24 {
			return a, EINVAL
		}
		a.port = binary.BigEndian.Uint16(b[2:])
		copy(a.ip[:], b[8:24])
	default:
		return a, EAFNOSUPPORT
	}
	return a, ESUCCESS
}

// writeSockAddr stores a at p, honouring the caller's buffer length at lenp.
func writeSockAddr(m mem, a sockAddr, p, lenp uint32) vfs.Errno {
	if p == 0 {
		return ESUCCESS
	}
	var b []byte
	switch a.family {
	case afInet6:
		b = make([]byte, 28)
		binary.BigEndian.PutUint16(b[2:], a.port)
		copy(b[8:24], a.ip[:])
	default:
		b = make([]byte, 16)
		binary.BigEndian.PutUint16(b[2:], a.port)
		copy(b[4:8], a.ip[:4])
	}
	binary.LittleEndian.PutUint16(b, a.family)
	room := m.u32(lenp)
	if !m.ok(lenp, 4) {
		return EFAULT
	}
	n := uint32(len(b))
	if room < n {
		n = room
	}
	dst, ok := m.bytes(p, n)
	if !ok {
		return EFAULT
	}
	copy(dst, b)
	m.put32(lenp, uint32(len(b)))
	return ESUCCESS
}

func (h *Host) socketCall(_ context.Context, _ api.Module, stack []uint64) {
	domain, typ := i32(stack[0]), i32(stack[1])
	base := typ &^ (sockNonblock | sockCloexec)
	if domain != afInet && domain != afInet6 {
		stack[0] = neg(EAFNOSUPPORT)
		return
	}
	if base != sockStream && base != sockDgram {
		stack[0] = neg(EPROTONOSUPPORT)
		return
	}
	s := &socket{net: h.net, family: uint16(domain), typ: base}
	s.local.family = s.family
	flags := vfs.O_RDWR
	if typ&sockNonblock != 0 {
		flags |= vfs.O_NONBLOCK
	}
	fd, errno := h.fds.alloc(&description{s: s, path: "socket:", flags: flags}, 0, typ&sockCloexec != 0)
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	stack[0] = ret32(fd)
}

func (h *Host) bind(_ context.Context, mod api.Module, stack []uint64) {
	s, errno := h.sock(i32(stack[0]))
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	a, errno := readSockAddr(memOf(mod), u32(stack[1]), u32(stack[2]))
	switch {
	case errno != ESUCCESS:
	case s.bound:
		errno = EINVAL
	case !a.loopbackOrAny():
		errno = EADDRNOTAVAIL
	case a.port != 0 && h.net.listeners[a.key()] != nil:
		errno = EADDRINUSE
	}
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	if a.port == 0 {
		a.port = h.net.ephemeral(a)
	}
	s.local, s.bound = a.key(), true
	stack[0] = 0
}

func (n *network) ephemeral(a sockAddr) uint16 {
	for {
		n.nextPort++
		if n.nextPort < 40000 {
			n.nextPort = 40000
		}
		a.port = n.nextPort
		if n.listeners[a.key()] == nil {
			return n.nextPort
		}
	}
}

func (h *Host) listen(_ context.Context, _ api.Module, stack []uint64) {
	s, errno := h.sock(i32(stack[0]))
	if errno == ESUCCESS && s.typ != sockStream {
		errno = ENOTSUP
	}
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	if !s.bound {
		s.local = sockAddr{family: s.family}
		s.local.port = h.net.ephemeral(s.local)
		s.local, s.bound = s.local.key(), true
	}
	s.listening = true
	h.net.listeners[s.local] = s
	stack[0] = 0
}

func (h *Host) connect(_ context.Context, mod api.Module, stack []uint64) {
	s, errno := h.sock(i32(stack[0]))
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	a, errno := readSockAddr(memOf(mod), u32(stack[1]), u32(stack[2]))
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	if s.in != nil {
		stack[0] = neg(EISCONN)
		return
	}
	if !a.loopbackOrAny() {
		stack[0] = neg(ENETUNREACH)
		return
	}
	l := h.net.listeners[a.key()]
	if l == nil || s.typ != sockStream || len(l.queue) >= maxQueued {
		stack[0] = neg(ECONNREFUSED)
		return
	}
	if !s.bound {
		s.local = sockAddr{family: s.family}
		s.local.port = h.net.ephemeral(s.local)
		s.local, s.bound = s.local.key(), true
	}
	srv := &socket{net: h.net, family: l.family, typ: sockStream, local: l.local, peer: s.local, bound: true}
	c2s, s2c := h.net.bufs.newBuffer(), h.net.bufs.newBuffer()
	s.out, s.in, s.peer = c2s, s2c, l.local
	srv.in, srv.out = c2s, s2c
	l.queue = append(l.queue, srv)
	stack[0] = 0
}

func (h *Host) accept4(_ context.Context, mod api.Module, stack []uint64) {
	s, errno := h.sock(i32(stack[0]))
	if errno == ESUCCESS && !s.listening {
		errno = EINVAL
	}
	if errno == ESUCCESS && len(s.queue) == 0 {
		errno = EAGAIN
	}
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	c := s.queue[0]
	s.queue = s.queue[1:]
	flags := i32(stack[3])
	oflags := vfs.O_RDWR
	if flags&sockNonblock != 0 {
		oflags |= vfs.O_NONBLOCK
	}
	fd, errno := h.fds.alloc(&description{s: c, path: "socket:", flags: oflags}, 0, flags&sockCloexec != 0)
	if errno != ESUCCESS {
		c.Close()
		stack[0] = neg(errno)
		return
	}
	if errno := writeSockAddr(memOf(mod), c.peer, u32(stack[1]), u32(stack[2])); errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	stack[0] = ret32(fd)
}

func (h *Host) getsockname(_ context.Context, mod api.Module, stack []uint64) {
	s, errno := h.sock(i32(stack[0]))
	if errno == ESUCCESS {
		errno = writeSockAddr(memOf(mod), s.local, u32(stack[1]), u32(stack[2]))
	}
	stack[0] = neg(errno)
}

func (h *Host) getpeername(_ context.Context, mod api.Module, stack []uint64) {
	s, errno := h.sock(i32(stack[0]))
	if errno == ESUCCESS && s.in == nil {
		errno = ENOTCONN
	}
	if errno == ESUCCESS {
		errno = writeSockAddr(memOf(mod), s.peer, u32(stack[1]), u32(stack[2]))
	}
	stack[0] = neg(errno)
}

// getsockopt(fd, level, optname, optval, optlen, _)
func (h *Host) getsockopt(_ context.Context, mod api.Module, stack []uint64) {
	s, errno := h.sock(i32(stack[0]))
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	if i32(stack[1]) != solSocket {
		stack[0] = neg(ENOPROTOOPT)
		return
	}
	var v int32
	switch i32(stack[2]) {
	case 3: // SO_TYPE
		v = s.typ
	case 4: // SO_ERROR
		v = 0
	case 39: // SO_DOMAIN
		v = int32(s.family)
	case 38: // SO_PROTOCOL
		v = 6
		if s.typ == sockDgram {
			v = 17
		}
	case 30: // SO_ACCEPTCONN
		if s.listening {
			v = 1
		}
	case 7, 8: // SO_SNDBUF, SO_RCVBUF
		v = bufferCap
	case 2, 9: // SO_REUSEADDR, SO_KEEPALIVE
		v = 0
	default:
		stack[0] = neg(ENOPROTOOPT)
		return
	}
	m := memOf(mod)
	val, lenp := u32(stack[3]), u32(stack[4])
	if m.u32(lenp) < 4 || !m.put32(val, uint32(v)) || !m.put32(lenp, 4) {
		stack[0] = neg(EINVAL)
		return
	}
	stack[0] = 0
}

// sendto(fd, buf, len, flags, addr, addrlen)
func (h *Host) sendto(_ context.Context, mod api.Module, stack []uint64) {
	s, errno := h.sock(i32(stack[0]))
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	if u32(stack[4]) != 0 && s.in == nil {
		a, errno := readSockAddr(memOf(mod), u32(stack[4]), u32(stack[5]))
		if errno == ESUCCESS && !a.loopbackOrAny() {
			errno = ENETUNREACH
		} else if errno == ESUCCESS {
			errno = ECONNREFUSED
		}
		stack[0] = neg(errno)
		return
	}
	b, ok := memOf(mod).bytes(u32(stack[1]), u32(stack[2]))
	if !ok {
		stack[0] = neg(EFAULT)
		return
	}
	n, errno := s.Write(b)
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	stack[0] = uint64(n)
}

// recvfrom(fd, buf, len, flags, addr, addrlen)
func (h *Host) recvfrom(_ context.Context, mod api.Module, stack []uint64) {
	s, errno := h.sock(i32(stack[0]))
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	m := memOf(mod)
	b, ok := m.bytes(u32(stack[1]), u32(stack[2]))
	if !ok {
		stack[0] = neg(EFAULT)
		return
	}
	n, errno := s.Read(b)
	if errno == ESUCCESS {
		errno = writeSockAddr(m, s.peer, u32(stack[4]), u32(stack[5]))
	}
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	stack[0] = uint64(n)
}

// msghdr on wasm32: name, namelen, iov, iovlen, control, controllen, flags.
func (h *Host) sendmsg(_ context.Context, mod api.Module, stack []uint64) {
	h.msg(mod, stack, true)
}

func (h *Host) recvmsg(_ context.Context, mod api.Module, stack []uint64) {
	h.msg(mod, stack, false)
}

func (h *Host) msg(mod api.Module, stack []uint64, send bool) {
	s, errno := h.sock(i32(stack[0]))
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	m := memOf(mod)
	hdr := u32(stack[1])
	if !m.ok(hdr, 28) {
		stack[0] = neg(EFAULT)
		return
	}
	bufs, ok := m.iovecs(nil, m.u32(hdr+8), m.u32(hdr+12))
	if !ok {
		stack[0] = neg(EFAULT)
		return
	}
	op := s.Read
	if send {
		op = s.Write
	}
	total, errno := transfer(bufs, op)
	if errno != ESUCCESS {
		stack[0] = neg(errno)
		return
	}
	if !send {
		m.put32(hdr+20, 0)
		m.put32(hdr+24, 0)
	}
	stack[0] = uint64(total)
}

// _try_shutdown(fd, how, resultPtr) -> handled: shutdown of loopback sockets.
func (h *Host) tryShutdown(_ context.Context, mod api.Module, stack []uint64) {
	s, errno := h.sock(i32(stack[0]))
	if errno != ESUCCESS {
		stack[0] = 0
		return
	}
	how := i32(stack[1])
	if (how == 0 || how == 2) && s.in != nil {
		s.in.closeRead()
	}
	if (how == 1 || how == 2) && s.out != nil {
		s.out.writeClosed = true
	}
	memOf(mod).put32(u32(stack[2]), 0)
	stack[0] = 1
}

// _try_fcntl64(fd, cmd, arg, resultPtr) -> handled: sockets use the generic fcntl.
func (h *Host) tryFcntl(_ context.Context, _ api.Module, stack []uint64) { stack[0] = 0 }

// getaddrinfo's error codes (musl's) and flags.
const (
	eaiBadFlags = -1
	eaiNoName   = -2
	eaiFamily   = -6
	eaiSockType = -7
	eaiService  = -8
	eaiMemory   = -10

	aiPassive     = 0x1
	aiCanonName   = 0x2
	aiNumericHost = 0x4
	aiV4Mapped    = 0x8 // accepted, unused: no IPv6
	aiAll         = 0x10
	aiAddrConfig  = 0x20
	aiNumericServ = 0x400

	ipprotoTCP = 6
	ipprotoUDP = 17
)

// getaddrinfo(node, service, hints, res) -> 0 or EAI_*. The glue resolves
// names to fake addresses for its WebSocket proxy; the sandbox's network
// is its in-memory loopback, so what resolves is what needs no lookup: a
// numeric IPv4 address, "localhost", and no node (the any address with
// AI_PASSIVE, else loopback), which is what binding, listening and
// connecting there ask (socket.create_connection, create_server). Other
// names get EAI_NONAME, "Name or service not known", and so do IPv6
// addresses: Pyodide's socket module is built without IPv6 (has_ipv6 is
// False: it could not read the address). A service must be a port number.
// As Emscripten's, the result is one addrinfo and its sockaddr, each from
// the guest's malloc, which its freeaddrinfo frees.
func (h *Host) getaddrinfo(ctx context.Context, mod api.Module, stack []uint64) {
	m := memOf(mod)
	nodep, servp, hintp, resp := u32(stack[0]), u32(stack[1]), u32(stack[2]), u32(stack[3])
	var flags, family, typ, proto int32
	if hintp != 0 {
		if !m.ok(hintp, 16) {
			stack[0] = ret32(eaiFamily)
			return
		}
		flags, family, typ, proto = int32(m.u32(hintp)), int32(m.u32(hintp+4)), int32(m.u32(hintp+8)), int32(m.u32(hintp+12))
	}
	code := func() int32 {
		switch {
		case nodep == 0 && servp == 0:
			return eaiNoName
		case flags&^(aiPassive|aiCanonName|aiNumericHost|aiNumericServ|aiV4Mapped|aiAll|aiAddrConfig) != 0,
			flags&aiCanonName != 0 && nodep == 0:
			return eaiBadFlags
		case family != 0 && family != afInet:
			return eaiFamily
		}
		if proto != 0 && typ == 0 {
			typ = sockStream
			if proto == ipprotoUDP {
				typ = sockDgram
			}
		}
		if typ == 0 {
			typ = sockStream
		}
		if typ != sockStream && typ != sockDgram {
			return eaiSockType
		}
		if proto == 0 {
			proto = ipprotoTCP
			if typ == sockDgram {
				proto = ipprotoUDP
			}
		}
		var a sockAddr
		if servp != 0 {
			serv, ok := m.cstring(servp, 64)
			port, err := strconv.ParseUint(serv, 10, 16)
			if !ok || err != nil {
				if flags&aiNumericServ != 0 {
					return eaiNoName
				}
				return eaiService
			}
			a.port = uint16(port)
		}
		a.family = afInet
		loopback := [16]byte{127, 0, 0, 1}
		if nodep == 0 {
			if flags&aiPassive == 0 {
				a.ip = loopback
			}
			return h.addrinfo(ctx, mod, resp, a, typ, proto)
		}
		node, ok := m.cstring(nodep, 1024)
		if !ok {
			return eaiNoName
		}
		ip, err := netip.ParseAddr(node)
		switch {
		case err == nil && ip.Is4():
			v4 := ip.As4()
			copy(a.ip[:4], v4[:])
		case err == nil || flags&aiNumericHost != 0 || !strings.EqualFold(node, "localhost"):
			return eaiNoName
		default:
			a.ip = loopback
		}
		return h.addrinfo(ctx, mod, resp, a, typ, proto)
	}()
	stack[0] = ret32(code)
}

// addrinfo stores at resp one addrinfo for the IPv4 address a (wasm32's struct addrinfo:
// flags, family, socktype, protocol, addrlen, addr, canonname, next), and
// returns 0, or EAI_MEMORY when the guest's malloc fails.
func (h *Host) addrinfo(ctx context.Context, mod api.Module, resp uint32, a sockAddr, typ, proto int32) int32 {
	m := memOf(mod)
	if !m.ok(resp, 4) {
		return eaiMemory
	}
	const salen = 16 // sockaddr_in
	sa, ai := h.guestMalloc(ctx, mod, salen), h.guestMalloc(ctx, mod, 32)
	m = memOf(mod) // the calls may have grown the memory
	if sa == 0 || ai == 0 || !m.ok(sa, salen) || !m.ok(ai, 32) {
		return eaiMemory // what was allocated is left: the guest is out of memory
	}
	b, _ := m.bytes(sa, salen)
	clear(b)
	binary.LittleEndian.PutUint16(b, a.family)
	binary.BigEndian.PutUint16(b[2:], a.port)
	copy(b[4:8], a.ip[:4])
	for i, v := range [8]uint32{0, uint32(a.family), uint32(typ), uint32(proto), salen, sa, 0, 0} {
		m.put32(ai+4*uint32(i), v)
	}
	m.put32(resp, ai)
	return 0
}

// guestMalloc calls the guest's malloc, from an import (as the glue's
// JavaScript does); 0 when it fails.
func (h *Host) guestMalloc(ctx context.Context, mod api.Module, n uint32) uint32 {
	return h.guestCall(ctx, mod, "malloc", uint64(n))
}

func (h *Host) getnameinfo(_ context.Context, _ api.Module, stack []uint64) {
	stack[0] = ret32(-2)
}

// getprotobyname(name) -> struct protoent*: none known.
func (h *Host) getprotobyname(_ context.Context, _ api.Module, stack []uint64) { stack[0] = 0 }

// _emscripten_lookup_name(name) -> in_addr: 0, nothing resolves.
func (h *Host) lookupName(_ context.Context, _ api.Module, stack []uint64) { stack[0] = 0 }
