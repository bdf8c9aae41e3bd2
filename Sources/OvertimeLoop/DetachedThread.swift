#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Runs blocking work on a thread of its own that nobody waits for (a kernel call that only
/// sleeps, kept off the loop).
public enum DetachedThread {
    private final class Work {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    public static func run(_ body: @escaping () -> Void) {
        let work = Unmanaged.passRetained(Work(body)).toOpaque()
        var thread = pthread_t()
        let started = pthread_create(&thread, nil, { raw in
            let work = Unmanaged<Work>.fromOpaque(raw!).takeRetainedValue()
            work.body()
            return nil
        }, work)
        if started == 0 {
            pthread_detach(thread)
        } else {
            Unmanaged<Work>.fromOpaque(work).takeRetainedValue().body()   // no thread: do it here
        }
    }
}
