package runtime

import (
	"encoding/binary"

	"github.com/rlm-sandbox/rlm-sandbox/runtime/internal/vfs"
)

// channel is the device /dev/rlm through which the Go host and the guest's
// _rlm module exchange requests and replies. The host fills req before a
// call; the guest reads it to the end, then writes its reply.
type channel struct {
	req  []byte
	resp []byte
}

func (c *channel) Read(p []byte) (int, vfs.Errno) {
	n := copy(p, c.req)
	c.req = c.req[n:]
	return n, vfs.ESUCCESS
}

func (c *channel) Write(p []byte) (int, vfs.Errno) {
	c.resp = append(c.resp, p...)
	return len(p), vfs.ESUCCESS
}

// reset loads a request, prefixed with its length.
func (c *channel) reset(req []byte) {
	c.req = binary.LittleEndian.AppendUint64(make([]byte, 0, 8+len(req)), uint64(len(req)))
	c.req = append(c.req, req...)
	c.resp = c.resp[:0]
}
