package autorate

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The calls each tick makes (a probe sent, replies read, two counters)
// are raw system calls, outside the Go scheduler's syscall hooks. Every
// ordinary call enters the scheduler, and the first one after the
// process slept wakes the runtime's monitor thread (sysmon), which then
// polls every 20 µs until the process sleeps again: on the host 7 extra
// sleeps and 2 futex calls per 50 ms tick (strace), in the lab's emulated
// guest, where a tick's work takes milliseconds, dozens. None of these
// calls can block (the sockets are non-blocking, the counters are sysfs),
// which is what makes a raw call safe. The numbers are x/sys's: the
// syscall package has none for sendto and recvmsg on 386 (socketcall),
// whose kernels have had both calls since 4.3.

func rawSendto(fd int, b []byte, to unsafe.Pointer, size uintptr) error {
	_, _, e := syscall.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
		syscall.MSG_DONTWAIT, uintptr(to), size)
	if e != 0 {
		return e
	}
	return nil
}

func rawRecvmsg(fd int, msg *syscall.Msghdr) (int, error) {
	n, _, e := syscall.RawSyscall(unix.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(msg)), syscall.MSG_DONTWAIT)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// rawPread0 reads fd from offset 0. The offset's words are all zero, so
// the same call is right where a 32-bit ABI splits it over an aligned
// register pair (arm, mipsle) and where it is one register.
func rawPread0(fd int, b []byte) (int, error) {
	n, _, e := syscall.RawSyscall6(unix.SYS_PREAD64, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
