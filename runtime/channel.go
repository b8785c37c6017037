package runtime

import (
	"encoding/binary"
	"math"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/vfs"
)

// channel is the device /dev/rlm through which the Go host and the guest's
// _rlm module exchange requests and replies. The host loads a request
// before a call; the guest reads it to the end, then writes its reply.
//
// A request is the marshal-encoded request when it fits in the guest's
// first read (shortRequest bytes), else a 0 byte (no marshal type code),
// its 8-byte little-endian length and the request; then, optionally, raw
// bytes the request announces (large text, which then reaches the guest
// without a marshal copy). A read ends where the request does, so that the
// guest takes a short request in one read without taking raw bytes with it.
type channel struct {
	req   [][]byte // what is left to read, in order
	head  int      // how many of req are the request (the rest is raw)
	resp  []byte
	parts [3][]byte // req's backing array, reused
	max   int       // the most resp may hold (deviceLimit)
}

// deviceLimit is the most a guest may have written to a device of the
// host's (/dev/rlm, /dev/rlm-bridge) before the host reads it: the memory
// it holds is the host's, outside what MemoryLimit counts. A reply or a
// request of the guest's own code is data the guest held, so a legitimate
// one never exceeds the guest's memory limit; code that writes to the
// device itself gets EFBIG past it.
func deviceLimit(memoryLimit uint64) int {
	if memoryLimit == 0 || memoryLimit > MaxMemoryLimit {
		memoryLimit = MaxMemoryLimit
	}
	return int(min(memoryLimit, math.MaxInt))
}

// keepBuffer is the capacity a device's buffer keeps between requests;
// a larger one is let go of, so that one large reply (or code writing to
// the device) does not hold host memory after it.
const keepBuffer = 1 << 20

func (c *channel) Read(p []byte) (int, vfs.Errno) {
	n := 0
	for n < len(p) && len(c.req) > 0 {
		k := copy(p[n:], c.req[0])
		n += k
		if c.req[0] = c.req[0][k:]; len(c.req[0]) == 0 {
			c.req[0] = nil
			c.req = c.req[1:]
			if c.head--; c.head == 0 {
				break
			}
		}
	}
	return n, vfs.ESUCCESS
}

func (c *channel) Write(p []byte) (int, vfs.Errno) {
	if len(p) > c.max-len(c.resp) {
		return 0, vfs.EFBIG
	}
	c.resp = append(c.resp, p...)
	return len(p), vfs.ESUCCESS
}

// shortRequest is the size of the guest's first read of a request
// (boot.py, recv): a request up to this size goes as it is.
const shortRequest = 65536

// reset loads a request (prefixed with a 0 byte and its length if it is
// longer than shortRequest) followed by raw, which the channel references,
// not copies.
func (c *channel) reset(req []byte, raw []byte) {
	if len(req) <= shortRequest {
		c.req = append(c.parts[:0], req)
	} else {
		c.req = append(c.parts[:0], binary.LittleEndian.AppendUint64([]byte{0}, uint64(len(req))), req)
	}
	c.head = len(c.req)
	if len(raw) > 0 {
		c.req = append(c.req, raw)
	}
	c.resp = c.resp[:0]
	c.dropLarge()
}

// dropLarge lets go of a reply buffer larger than keepBuffer.
func (c *channel) dropLarge() {
	if cap(c.resp) > keepBuffer {
		c.resp = nil
	}
}

// clear drops what the guest did not read (raw text may be large: the
// reused array must not keep it either).
func (c *channel) clear() { c.req, c.parts = nil, [3][]byte{} }
