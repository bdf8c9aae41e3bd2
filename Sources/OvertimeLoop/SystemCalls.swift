#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// write(2), read(2), send(2) and close(2) by names no method shadows: inside a type with a
// `write` or `close` of its own the bare name is that method, and the module-qualified
// `Glibc.write` would leave the Musl build without a way to say it.

@inlinable
public func systemWrite(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int {
    write(fd, bytes, count)
}

@inlinable
public func systemRead(_ fd: Int32, _ bytes: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(fd, bytes, count)
}

@inlinable
public func systemSend(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int, _ flags: Int32) -> Int {
    send(fd, bytes, count, flags)
}

@inlinable @discardableResult
public func systemClose(_ fd: Int32) -> Int32 {
    close(fd)
}
