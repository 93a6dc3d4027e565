package sqlite

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// walVFSName is the VFS both pools open the database through: SQLite's
// own unix VFS, except that writes to a write-ahead log are gathered and
// handed to the operating system in one call when SQLite syncs the log.
//
// SQLite writes each frame of a commit with two calls (the 24-byte frame
// header, then the page), so a plain turn's commit of about 16 pages made
// some 32 pwrite calls before its fsync, each 9–17 µs on the machines we
// measure on (bench/README.md, "Turn by turn, from idle"). Gathered, a
// commit makes one. The store's BenchmarkPlainTurnWrites and the bench
// package's BenchmarkSideBySide and BenchmarkEventLogCost measure it
// (numbers in bench/README.md, "Gathered WAL writes").
//
// Why this keeps SQLite's guarantees: a frame reaches other connections
// (in this process or another) only through the WAL index, whose header
// SQLite publishes after a barrier on the database file's shared memory
// (xShmBarrier), and the writer syncs the log at every commit before it
// publishes (synchronous=FULL, checked in Open; the log of a database
// opened without powersafe overwrite, whose commits write padding after
// the sync, is not gathered). The buffer is written out before every sync
// of the log, so a commit's frames are in the file before it is published
// and before the commit returns, and a crash loses only frames no commit
// had synced, as it would without the buffer. It is also written out
// before a read, truncation, size query, file control or close of the log
// (so SQLite never reads its own log without the frames it wrote), and at
// every barrier (SQLite calls it around reads of the index's header too),
// where under FULL it finds nothing. A write-out that fails at a sync is
// dropped: the commit fails, and its frames must not reach the file
// later, where recovery after a crash would find them; one that fails at
// a read, truncation, size query or file control keeps the bytes for the
// next attempt; at a close they go. When the connection releases the
// log's write lock (xShmLock on the database file), anything still
// gathered belongs to a transaction that did not commit (pages it spilled
// before rolling back): it is dropped, not written, so it can never land
// on frames another writer commits next. Only contiguous appends are
// gathered; any other write first writes out what is gathered. Files
// other than write-ahead logs are passed to the unix VFS as they are.
//
// The VFS is for the store's own connections, opened in Open: the writer
// at synchronous=FULL, every connection in SQLite's normal locking mode.
// A connection at NORMAL (no sync at a commit) or one that switches
// locking_mode to EXCLUSIVE and back after its log is open (the release
// of the write lock is then not seen) is outside what it is built for.
const walVFSName = "appserver-walbuf"

// walBufferLimit bounds the gathered bytes of one log: a larger run is
// written out as it grows (a commit of many pages costs a call per
// 120 KiB, not two per page). The unix VFS keeps only the low 17 bits of
// a write's length (SQLite itself never writes more than a 64 KiB page at
// once), so a gathered write must stay under 128 KiB.
const walBufferLimit = 120 << 10

var registerWALVFS = sync.OnceValue(func() error {
	tls := libc.NewTLS()
	defer tls.Close()
	unixName, err := libc.CString("unix")
	if err != nil {
		return err
	}
	defer libc.Xfree(tls, unixName)
	unix := sqlite3.Xsqlite3_vfs_find(tls, unixName)
	if unix == 0 {
		return errNoUnixVFS
	}
	base := (*sqlite3.Tsqlite3_vfs)(unsafe.Add(nil, unix))
	p := libc.Xmalloc(tls, libc.Tsize_t(unsafe.Sizeof(sqlite3.Tsqlite3_vfs{})))
	if p == 0 {
		return errNoMemory
	}
	v := (*sqlite3.Tsqlite3_vfs)(unsafe.Add(nil, p))
	*v = *base
	v.FpNext = 0
	v.FszOsFile = int32(unsafe.Sizeof(wrappedFile{})) + base.FszOsFile
	name, err := libc.CString(walVFSName)
	if err != nil {
		return err
	}
	v.FzName = name
	v.FxOpen = cfunc(walOpen)
	walUnix = unix
	setWALMethods()
	if rc := sqlite3.Xsqlite3_vfs_register(tls, p, 0); rc != sqlite3.SQLITE_OK {
		return errRegisterVFS
	}
	return nil
})

// walUnix is the unix VFS the wrapper opens files with.
var walUnix uintptr

// wrappedFile is the start of a file's sqlite3_file, in SQLite's memory
// (szOsFile is its size plus the unix VFS's): the methods pointer SQLite
// calls through, then the wrapper's state; the unix file follows it
// (innerFile). Its size is a multiple of 8, so the unix file stays
// aligned. The unix file's own first word is its methods, which the
// wrapper calls.
type wrappedFile struct {
	methods uintptr // &walMethods
	// peer is, for a database file, its log's wrappedFile (0 until the log
	// opens); for a log, its database file's. Both belong to one pager.
	peer uintptr
	// For a log that gathers: n bytes at mem (SQLite's allocator,
	// walBufferLimit long, taken at the first write), to be written at
	// off.
	mem    uintptr
	n      int64
	off    int64
	gather bool // a log that gathers
}

// wrappedFile's size is a multiple of 8, or this does not compile.
var _ [0]struct{} = [unsafe.Sizeof(wrappedFile{}) % 8]struct{}{}

func wrapped(pFile uintptr) *wrappedFile {
	return (*wrappedFile)(unsafe.Add(nil, pFile))
}

func innerFile(pFile uintptr) uintptr { return pFile + unsafe.Sizeof(wrappedFile{}) }

// inner is the unix VFS's methods for pFile.
func inner(pFile uintptr) *sqlite3.Tsqlite3_io_methods {
	return (*sqlite3.Tsqlite3_io_methods)(unsafe.Add(nil, (*sqlite3.Tsqlite3_file)(unsafe.Add(nil, innerFile(pFile))).FpMethods))
}

func (f *wrappedFile) bytes() []byte {
	return unsafe.Slice((*byte)(unsafe.Add(nil, f.mem)), walBufferLimit)
}

// walWrites counts, over the process, the writes SQLite asks of gathering
// logs (asked) and those the wrapper hands to the unix VFS for them
// (made): the tests read them.
var walWrites struct{ asked, made atomic.Int64 }

// walFlushFault, when set, makes every write-out of a buffer fail: the
// tests' way to a failing disk.
var walFlushFault atomic.Bool

type walError string

func (e walError) Error() string { return string(e) }

const (
	errNoUnixVFS   walError = "sqlite: no unix VFS to wrap"
	errNoMemory    walError = "sqlite: out of memory registering the VFS"
	errRegisterVFS walError = "sqlite: cannot register the VFS"
)

// walOpen opens a file with the unix VFS, after the wrapper's header, and
// gives it the wrapper's methods. A log is paired with its database file.
func walOpen(tls *libc.TLS, _ uintptr, zName, pFile uintptr, flags int32, pOutFlags uintptr) int32 {
	open := call[func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32]((*sqlite3.Tsqlite3_vfs)(unsafe.Add(nil, walUnix)).FxOpen)
	f := wrapped(pFile)
	*f = wrappedFile{}
	if rc := open(tls, walUnix, zName, innerFile(pFile), flags, pOutFlags); rc != sqlite3.SQLITE_OK {
		return rc
	}
	if flags&sqlite3.SQLITE_OPEN_WAL != 0 {
		if db := sqlite3.Xsqlite3_database_file_object(tls, zName); db != 0 && wrapped(db).methods == walMethodsAddr() {
			f.peer = db
			wrapped(db).peer = pFile
			// Gather only where SQLite syncs a commit's last frame
			// whole: without powersafe overwrite (psow=0) it pads the
			// commit and writes part of the padding after the sync.
			if walDeviceCharacteristics(tls, db)&sqlite3.SQLITE_IOCAP_POWERSAFE_OVERWRITE != 0 {
				f.gather = true
			}
		}
	}
	f.methods = walMethodsAddr()
	return sqlite3.SQLITE_OK
}

// walMethods are a wrapped file's io_methods. A package variable without
// pointer fields, not a heap object: SQLite holds only its address.
var walMethods sqlite3.Tsqlite3_io_methods

func walMethodsAddr() uintptr { return uintptr(unsafe.Pointer(&walMethods)) }

func setWALMethods() {
	walMethods = sqlite3.Tsqlite3_io_methods{
		FiVersion:               3,
		FxClose:                 cfunc(walClose),
		FxRead:                  cfunc(walRead),
		FxWrite:                 cfunc(walWrite),
		FxTruncate:              cfunc(walTruncate),
		FxSync:                  cfunc(walSync),
		FxFileSize:              cfunc(walFileSize),
		FxLock:                  cfunc(walLock),
		FxUnlock:                cfunc(walUnlock),
		FxCheckReservedLock:     cfunc(walCheckReservedLock),
		FxFileControl:           cfunc(walFileControl),
		FxSectorSize:            cfunc(walSectorSize),
		FxDeviceCharacteristics: cfunc(walDeviceCharacteristics),
		FxShmMap:                cfunc(walShmMap),
		FxShmLock:               cfunc(walShmLock),
		FxShmBarrier:            cfunc(walShmBarrier),
		FxShmUnmap:              cfunc(walShmUnmap),
		FxFetch:                 cfunc(walFetch),
		FxUnfetch:               cfunc(walUnfetch),
	}
}

// cfunc is a Go function as the transpiled SQLite calls it through a
// pointer.
func cfunc[F any](f F) uintptr {
	return *(*uintptr)(unsafe.Pointer(&struct{ f F }{f}))
}

// call is the reverse of cfunc: the function a pointer from SQLite names.
func call[F any](p uintptr) F {
	return *(*F)(unsafe.Pointer(&struct{ p uintptr }{p}))
}

// flush writes out what log pFile has gathered. On failure the bytes
// stay, unless drop: then they are gone either way.
func flush(tls *libc.TLS, pFile uintptr, drop bool) int32 {
	f := wrapped(pFile)
	if f.n == 0 {
		return sqlite3.SQLITE_OK
	}
	rc := int32(sqlite3.SQLITE_IOERR_WRITE)
	if !walFlushFault.Load() {
		walWrites.made.Add(1)
		rc = call[func(*libc.TLS, uintptr, uintptr, int32, int64) int32](inner(pFile).FxWrite)(tls, innerFile(pFile), f.mem, int32(f.n), f.off)
	}
	if rc == sqlite3.SQLITE_OK || drop {
		f.n = 0
	}
	return rc
}

func walWrite(tls *libc.TLS, pFile, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	f := wrapped(pFile)
	write := call[func(*libc.TLS, uintptr, uintptr, int32, int64) int32](inner(pFile).FxWrite)
	if !f.gather {
		return write(tls, innerFile(pFile), zBuf, iAmt, iOfst)
	}
	walWrites.asked.Add(1)
	if f.n > 0 && (f.off+f.n != iOfst || f.n+int64(iAmt) > walBufferLimit) {
		if rc := flush(tls, pFile, false); rc != sqlite3.SQLITE_OK {
			return rc
		}
	}
	if int(iAmt) > walBufferLimit {
		walWrites.made.Add(1)
		return write(tls, innerFile(pFile), zBuf, iAmt, iOfst)
	}
	if f.mem == 0 {
		if f.mem = libc.Xmalloc(tls, walBufferLimit); f.mem == 0 {
			return sqlite3.SQLITE_NOMEM
		}
	}
	if f.n == 0 {
		f.off = iOfst
	}
	f.n += int64(copy(f.bytes()[f.n:], unsafe.Slice((*byte)(unsafe.Add(nil, zBuf)), iAmt)))
	return sqlite3.SQLITE_OK
}

func walClose(tls *libc.TLS, pFile uintptr) int32 {
	f := wrapped(pFile)
	rc := flush(tls, pFile, true)
	if f.mem != 0 {
		libc.Xfree(tls, f.mem)
		f.mem = 0
	}
	if f.peer != 0 {
		wrapped(f.peer).peer = 0
		f.peer = 0
	}
	if rc2 := call[func(*libc.TLS, uintptr) int32](inner(pFile).FxClose)(tls, innerFile(pFile)); rc == sqlite3.SQLITE_OK {
		rc = rc2
	}
	return rc
}

func walRead(tls *libc.TLS, pFile, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	if rc := flush(tls, pFile, false); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call[func(*libc.TLS, uintptr, uintptr, int32, int64) int32](inner(pFile).FxRead)(tls, innerFile(pFile), zBuf, iAmt, iOfst)
}

func walTruncate(tls *libc.TLS, pFile uintptr, size int64) int32 {
	if rc := flush(tls, pFile, false); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call[func(*libc.TLS, uintptr, int64) int32](inner(pFile).FxTruncate)(tls, innerFile(pFile), size)
}

func walSync(tls *libc.TLS, pFile uintptr, flags int32) int32 {
	if rc := flush(tls, pFile, true); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call[func(*libc.TLS, uintptr, int32) int32](inner(pFile).FxSync)(tls, innerFile(pFile), flags)
}

func walFileSize(tls *libc.TLS, pFile, pSize uintptr) int32 {
	if rc := flush(tls, pFile, false); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call[func(*libc.TLS, uintptr, uintptr) int32](inner(pFile).FxFileSize)(tls, innerFile(pFile), pSize)
}

func walLock(tls *libc.TLS, pFile uintptr, lock int32) int32 {
	return call[func(*libc.TLS, uintptr, int32) int32](inner(pFile).FxLock)(tls, innerFile(pFile), lock)
}

func walUnlock(tls *libc.TLS, pFile uintptr, lock int32) int32 {
	return call[func(*libc.TLS, uintptr, int32) int32](inner(pFile).FxUnlock)(tls, innerFile(pFile), lock)
}

func walCheckReservedLock(tls *libc.TLS, pFile, pResOut uintptr) int32 {
	return call[func(*libc.TLS, uintptr, uintptr) int32](inner(pFile).FxCheckReservedLock)(tls, innerFile(pFile), pResOut)
}

func walFileControl(tls *libc.TLS, pFile uintptr, op int32, pArg uintptr) int32 {
	if rc := flush(tls, pFile, false); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call[func(*libc.TLS, uintptr, int32, uintptr) int32](inner(pFile).FxFileControl)(tls, innerFile(pFile), op, pArg)
}

func walSectorSize(tls *libc.TLS, pFile uintptr) int32 {
	return call[func(*libc.TLS, uintptr) int32](inner(pFile).FxSectorSize)(tls, innerFile(pFile))
}

func walDeviceCharacteristics(tls *libc.TLS, pFile uintptr) int32 {
	return call[func(*libc.TLS, uintptr) int32](inner(pFile).FxDeviceCharacteristics)(tls, innerFile(pFile))
}

func walShmMap(tls *libc.TLS, pFile uintptr, iPg, pgsz, bExtend int32, pp uintptr) int32 {
	m := inner(pFile)
	if m.FiVersion < 2 || m.FxShmMap == 0 {
		return sqlite3.SQLITE_IOERR_SHMMAP
	}
	return call[func(*libc.TLS, uintptr, int32, int32, int32, uintptr) int32](m.FxShmMap)(tls, innerFile(pFile), iPg, pgsz, bExtend, pp)
}

func walShmLock(tls *libc.TLS, pFile uintptr, offset, n, flags int32) int32 {
	if offset == sqlite3.WAL_WRITE_LOCK && flags&sqlite3.SQLITE_SHM_UNLOCK != 0 {
		// Releasing the write lock: what the log still gathers is a
		// transaction's that did not commit (a commit's sync wrote its
		// frames out or dropped them). It is not written.
		if log := wrapped(pFile).peer; log != 0 {
			wrapped(log).n = 0
		}
	}
	m := inner(pFile)
	if m.FiVersion < 2 || m.FxShmLock == 0 {
		return sqlite3.SQLITE_IOERR_SHMLOCK
	}
	return call[func(*libc.TLS, uintptr, int32, int32, int32) int32](m.FxShmLock)(tls, innerFile(pFile), offset, n, flags)
}

func walShmBarrier(tls *libc.TLS, pFile uintptr) {
	// SQLite calls the barrier before it publishes a new header of the
	// WAL index (and around reads of it). The writer syncs every commit
	// and gathers only with powersafe overwrite, so the sync has already
	// written the buffer out; this is a second guard, and a barrier
	// cannot report a failure.
	if log := wrapped(pFile).peer; log != 0 {
		_ = flush(tls, log, false)
	}
	if m := inner(pFile); m.FiVersion >= 2 && m.FxShmBarrier != 0 {
		call[func(*libc.TLS, uintptr)](m.FxShmBarrier)(tls, innerFile(pFile))
	}
}

func walShmUnmap(tls *libc.TLS, pFile uintptr, deleteFlag int32) int32 {
	m := inner(pFile)
	if m.FiVersion < 2 || m.FxShmUnmap == 0 {
		return sqlite3.SQLITE_OK
	}
	return call[func(*libc.TLS, uintptr, int32) int32](m.FxShmUnmap)(tls, innerFile(pFile), deleteFlag)
}

func walFetch(tls *libc.TLS, pFile uintptr, iOfst int64, iAmt int32, pp uintptr) int32 {
	if rc := flush(tls, pFile, false); rc != sqlite3.SQLITE_OK {
		return rc
	}
	m := inner(pFile)
	if m.FiVersion < 3 || m.FxFetch == 0 {
		*(*uintptr)(unsafe.Add(nil, pp)) = 0
		return sqlite3.SQLITE_OK
	}
	return call[func(*libc.TLS, uintptr, int64, int32, uintptr) int32](m.FxFetch)(tls, innerFile(pFile), iOfst, iAmt, pp)
}

func walUnfetch(tls *libc.TLS, pFile uintptr, iOfst int64, p uintptr) int32 {
	m := inner(pFile)
	if m.FiVersion < 3 || m.FxUnfetch == 0 {
		return sqlite3.SQLITE_OK
	}
	return call[func(*libc.TLS, uintptr, int64, uintptr) int32](m.FxUnfetch)(tls, innerFile(pFile), iOfst, p)
}
