// Package pipe makes pipes whose read end is read outside Go's network
// poller, with read deadlines.
//
// The read end of an os.Pipe is registered with the poller's epoll set.
// Every write to such a pipe then wakes a thread of the reading process
// that sleeps in epoll_wait (Go's scheduler parks an idle thread there
// whenever a timer is pending or a goroutine waits on a file), whether or
// not a goroutine waits for the pipe. When the reader is already polling
// for the data (see package spin), that wake-up is pure cost, paid by the
// writer: on a virtual machine it means an inter-processor interrupt and a
// virtual processor brought back from idle. A Reader's file stays out of
// the poller; a Read waits in poll(2) on the pipe and on a second pipe
// through which SetReadDeadline and Close wake it.
package pipe
