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
// (in this process or another) only through the WAL index, and SQLite
// changes the index's header, or gives up the log's write lock, only
// through the database file's shared-memory methods (xShmBarrier before a
// header is published, xShmLock to release the write lock), and the
// writer syncs the log at every commit before it publishes (synchronous=
// FULL, checked in Open; logs of a database opened without powersafe
// overwrite are not gathered). The wrapper sits on the database file too
// and writes out its log's buffer before each of those calls, and before every sync, read, truncation, size
// query, file control and close of the log itself. So no connection sees
// a frame of the index that is not in the file, a connection never reads
// its own log without the frames it wrote, frames spilled by a transaction
// that rolls back are in the file before another writer can take the
// lock, and a crash loses only frames no commit had synced, as it would
// without the buffer. Only contiguous appends are gathered; any other
// write first writes out what is gathered. A write-out that fails keeps
// the bytes for the next attempt (a commit's sync then fails), except at
// the release of the write lock, where what is left belongs to a
// transaction that did not commit and is dropped.
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
	v.FszOsFile = int32(walFileHeader) + base.FszOsFile
	name, err := libc.CString(walVFSName)
	if err != nil {
		return err
	}
	v.FzName = name
	v.FxOpen = cfunc(walOpen)
	walVFS.base = unix
	walVFS.files = map[uintptr]*wrappedFile{}
	setWALMethods()
	if rc := sqlite3.Xsqlite3_vfs_register(tls, p, 0); rc != sqlite3.SQLITE_OK {
		return errRegisterVFS
	}
	return nil
})

// walFileHeader is the size of what a wrapped file's sqlite3_file holds
// before the unix VFS's own file: the methods pointer SQLite calls through.
// It is a multiple of 8, so the unix file that follows stays aligned.
const walFileHeader = unsafe.Sizeof(sqlite3.Tsqlite3_file{})

// walVFS holds the unix VFS and the open files, by their sqlite3_file
// address.
var walVFS struct {
	base  uintptr // the unix VFS
	mu    sync.Mutex
	files map[uintptr]*wrappedFile
}

// wrappedFile is an open file of the VFS: the unix VFS's methods for it,
// and for a log its buffer, for a database file its log (the one whose
// pager it belongs to), 0 until the log opens.
type wrappedFile struct {
	inner *sqlite3.Tsqlite3_io_methods
	buf   *walBuffer
	wal   uintptr
}

// walWrites counts, over the process, the writes SQLite asks of wrapped
// logs (asked) and those the wrapper hands to the unix VFS (made): the
// tests read them.
var walWrites struct{ asked, made atomic.Int64 }

// walBuffer is one open log's gathered writes: n bytes at mem (memory of
// SQLite's allocator, walBufferLimit long, taken at the first write, so
// that SQLite's code may be handed its address), to be written at off.
type walBuffer struct {
	mem uintptr
	n   int
	off int64
}

func (b *walBuffer) bytes() []byte {
	return unsafe.Slice((*byte)(unsafe.Add(nil, b.mem)), walBufferLimit)
}

type walError string

func (e walError) Error() string { return string(e) }

const (
	errNoUnixVFS   walError = "sqlite: no unix VFS to wrap"
	errNoMemory    walError = "sqlite: out of memory registering the VFS"
	errRegisterVFS walError = "sqlite: cannot register the VFS"
)

// walOpen opens a file with the unix VFS, placed after the wrapper's
// header, and gives it the wrapper's methods. A log is paired with its
// database file, whose shared-memory calls write out the log's buffer.
func walOpen(tls *libc.TLS, _ uintptr, zName, pFile uintptr, flags int32, pOutFlags uintptr) int32 {
	open := call[func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32]((*sqlite3.Tsqlite3_vfs)(unsafe.Add(nil, walVFS.base)).FxOpen)
	inner := innerFile(pFile)
	(*sqlite3.Tsqlite3_file)(unsafe.Add(nil, pFile)).FpMethods = 0
	if rc := open(tls, walVFS.base, zName, inner, flags, pOutFlags); rc != sqlite3.SQLITE_OK {
		return rc
	}
	f := &wrappedFile{inner: (*sqlite3.Tsqlite3_io_methods)(unsafe.Add(nil, (*sqlite3.Tsqlite3_file)(unsafe.Add(nil, inner)).FpMethods))}
	var db uintptr
	if flags&sqlite3.SQLITE_OPEN_WAL != 0 {
		db = sqlite3.Xsqlite3_database_file_object(tls, zName)
		// Gather only where SQLite syncs a commit's last frame whole:
		// without powersafe overwrite (psow=0) it pads the commit and
		// writes part of the padding after the sync.
		if d := fileOf(db); d != nil && call[func(*libc.TLS, uintptr) int32](d.inner.FxDeviceCharacteristics)(tls, innerFile(db))&sqlite3.SQLITE_IOCAP_POWERSAFE_OVERWRITE != 0 {
			f.buf = &walBuffer{}
		}
	}
	walVFS.mu.Lock()
	walVFS.files[pFile] = f
	if d := walVFS.files[db]; d != nil {
		d.wal = pFile
	}
	walVFS.mu.Unlock()
	(*sqlite3.Tsqlite3_file)(unsafe.Add(nil, pFile)).FpMethods = uintptr(unsafe.Pointer(&walMethods))
	return sqlite3.SQLITE_OK
}

// walMethods are a wrapped file's io_methods. A package variable, not a
// heap object: SQLite holds only its address.
var walMethods sqlite3.Tsqlite3_io_methods

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

func innerFile(pFile uintptr) uintptr { return pFile + walFileHeader }

func fileOf(pFile uintptr) *wrappedFile {
	walVFS.mu.Lock()
	f := walVFS.files[pFile]
	walVFS.mu.Unlock()
	return f
}

// flush writes out what log pFile's buffer holds. On failure the bytes
// stay, for the next attempt.
func flush(tls *libc.TLS, pFile uintptr, f *wrappedFile) int32 {
	b := f.buf
	if b == nil || b.n == 0 {
		return sqlite3.SQLITE_OK
	}
	walWrites.made.Add(1)
	rc := call[func(*libc.TLS, uintptr, uintptr, int32, int64) int32](f.inner.FxWrite)(tls, innerFile(pFile), b.mem, int32(b.n), b.off)
	if rc == sqlite3.SQLITE_OK {
		b.n = 0
	}
	return rc
}

func walWrite(tls *libc.TLS, pFile, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	f := fileOf(pFile)
	b := f.buf
	write := call[func(*libc.TLS, uintptr, uintptr, int32, int64) int32](f.inner.FxWrite)
	if b == nil {
		return write(tls, innerFile(pFile), zBuf, iAmt, iOfst)
	}
	walWrites.asked.Add(1)
	if b.n > 0 && (b.off+int64(b.n) != iOfst || b.n+int(iAmt) > walBufferLimit) {
		if rc := flush(tls, pFile, f); rc != sqlite3.SQLITE_OK {
			return rc
		}
	}
	if int(iAmt) > walBufferLimit {
		walWrites.made.Add(1)
		return write(tls, innerFile(pFile), zBuf, iAmt, iOfst)
	}
	if b.mem == 0 {
		if b.mem = libc.Xmalloc(tls, walBufferLimit); b.mem == 0 {
			return sqlite3.SQLITE_NOMEM
		}
	}
	if b.n == 0 {
		b.off = iOfst
	}
	b.n += copy(b.bytes()[b.n:], unsafe.Slice((*byte)(unsafe.Add(nil, zBuf)), iAmt))
	return sqlite3.SQLITE_OK
}

func walClose(tls *libc.TLS, pFile uintptr) int32 {
	f := fileOf(pFile)
	rc := flush(tls, pFile, f)
	walVFS.mu.Lock()
	delete(walVFS.files, pFile)
	for _, d := range walVFS.files {
		if d.wal == pFile {
			d.wal = 0
		}
	}
	walVFS.mu.Unlock()
	if f.buf != nil && f.buf.mem != 0 {
		libc.Xfree(tls, f.buf.mem)
	}
	if rc2 := call[func(*libc.TLS, uintptr) int32](f.inner.FxClose)(tls, innerFile(pFile)); rc == sqlite3.SQLITE_OK {
		rc = rc2
	}
	return rc
}

func walRead(tls *libc.TLS, pFile, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	f := fileOf(pFile)
	if rc := flush(tls, pFile, f); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call[func(*libc.TLS, uintptr, uintptr, int32, int64) int32](f.inner.FxRead)(tls, innerFile(pFile), zBuf, iAmt, iOfst)
}

func walTruncate(tls *libc.TLS, pFile uintptr, size int64) int32 {
	f := fileOf(pFile)
	if rc := flush(tls, pFile, f); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call[func(*libc.TLS, uintptr, int64) int32](f.inner.FxTruncate)(tls, innerFile(pFile), size)
}

func walSync(tls *libc.TLS, pFile uintptr, flags int32) int32 {
	f := fileOf(pFile)
	if rc := flush(tls, pFile, f); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call[func(*libc.TLS, uintptr, int32) int32](f.inner.FxSync)(tls, innerFile(pFile), flags)
}

func walFileSize(tls *libc.TLS, pFile, pSize uintptr) int32 {
	f := fileOf(pFile)
	if rc := flush(tls, pFile, f); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call[func(*libc.TLS, uintptr, uintptr) int32](f.inner.FxFileSize)(tls, innerFile(pFile), pSize)
}

func walLock(tls *libc.TLS, pFile uintptr, lock int32) int32 {
	return call[func(*libc.TLS, uintptr, int32) int32](fileOf(pFile).inner.FxLock)(tls, innerFile(pFile), lock)
}

func walUnlock(tls *libc.TLS, pFile uintptr, lock int32) int32 {
	return call[func(*libc.TLS, uintptr, int32) int32](fileOf(pFile).inner.FxUnlock)(tls, innerFile(pFile), lock)
}

func walCheckReservedLock(tls *libc.TLS, pFile, pResOut uintptr) int32 {
	return call[func(*libc.TLS, uintptr, uintptr) int32](fileOf(pFile).inner.FxCheckReservedLock)(tls, innerFile(pFile), pResOut)
}

func walFileControl(tls *libc.TLS, pFile uintptr, op int32, pArg uintptr) int32 {
	f := fileOf(pFile)
	if rc := flush(tls, pFile, f); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call[func(*libc.TLS, uintptr, int32, uintptr) int32](f.inner.FxFileControl)(tls, innerFile(pFile), op, pArg)
}

func walSectorSize(tls *libc.TLS, pFile uintptr) int32 {
	return call[func(*libc.TLS, uintptr) int32](fileOf(pFile).inner.FxSectorSize)(tls, innerFile(pFile))
}

func walDeviceCharacteristics(tls *libc.TLS, pFile uintptr) int32 {
	return call[func(*libc.TLS, uintptr) int32](fileOf(pFile).inner.FxDeviceCharacteristics)(tls, innerFile(pFile))
}

// flushLog writes out the buffer of database file pFile's log, before a
// shared-memory call that may publish its frames or let another writer in.
func flushLog(tls *libc.TLS, pFile uintptr) int32 {
	walVFS.mu.Lock()
	var wal uintptr
	if f := walVFS.files[pFile]; f != nil {
		wal = f.wal
	}
	log := walVFS.files[wal]
	walVFS.mu.Unlock()
	if log == nil {
		return sqlite3.SQLITE_OK
	}
	return flush(tls, wal, log)
}

func walShmMap(tls *libc.TLS, pFile uintptr, iPg, pgsz, bExtend int32, pp uintptr) int32 {
	f := fileOf(pFile)
	if f.inner.FxShmMap == 0 {
		return sqlite3.SQLITE_IOERR_SHMMAP
	}
	return call[func(*libc.TLS, uintptr, int32, int32, int32, uintptr) int32](f.inner.FxShmMap)(tls, innerFile(pFile), iPg, pgsz, bExtend, pp)
}

func walShmLock(tls *libc.TLS, pFile uintptr, offset, n, flags int32) int32 {
	if rc := flushLog(tls, pFile); rc != sqlite3.SQLITE_OK {
		if offset != sqlite3.WAL_WRITE_LOCK || flags&sqlite3.SQLITE_SHM_UNLOCK == 0 {
			return rc
		}
		// Releasing the write lock: what is left is a transaction's
		// that did not commit (a commit's sync writes it out or fails).
		dropLog(pFile)
	}
	f := fileOf(pFile)
	if f.inner.FxShmLock == 0 {
		return sqlite3.SQLITE_IOERR_SHMLOCK
	}
	return call[func(*libc.TLS, uintptr, int32, int32, int32) int32](f.inner.FxShmLock)(tls, innerFile(pFile), offset, n, flags)
}

// dropLog empties the buffer of database file pFile's log.
func dropLog(pFile uintptr) {
	walVFS.mu.Lock()
	defer walVFS.mu.Unlock()
	if f := walVFS.files[pFile]; f != nil {
		if log := walVFS.files[f.wal]; log != nil && log.buf != nil {
			log.buf.n = 0
		}
	}
}

func walShmBarrier(tls *libc.TLS, pFile uintptr) {
	// SQLite calls the barrier just before it publishes a new header of
	// the WAL index. The writer syncs every commit (synchronous=FULL,
	// checked in Open) and gathers only with powersafe overwrite, so the
	// sync has already written the buffer out; this is a second guard,
	// and a barrier has no way to report a failure.
	_ = flushLog(tls, pFile)
	if f := fileOf(pFile); f.inner.FxShmBarrier != 0 {
		call[func(*libc.TLS, uintptr)](f.inner.FxShmBarrier)(tls, innerFile(pFile))
	}
}

func walShmUnmap(tls *libc.TLS, pFile uintptr, deleteFlag int32) int32 {
	f := fileOf(pFile)
	if f.inner.FxShmUnmap == 0 {
		return sqlite3.SQLITE_OK
	}
	return call[func(*libc.TLS, uintptr, int32) int32](f.inner.FxShmUnmap)(tls, innerFile(pFile), deleteFlag)
}

func walFetch(tls *libc.TLS, pFile uintptr, iOfst int64, iAmt int32, pp uintptr) int32 {
	f := fileOf(pFile)
	if rc := flush(tls, pFile, f); rc != sqlite3.SQLITE_OK {
		return rc
	}
	if f.inner.FiVersion < 3 || f.inner.FxFetch == 0 {
		*(*uintptr)(unsafe.Add(nil, pp)) = 0
		return sqlite3.SQLITE_OK
	}
	return call[func(*libc.TLS, uintptr, int64, int32, uintptr) int32](f.inner.FxFetch)(tls, innerFile(pFile), iOfst, iAmt, pp)
}

func walUnfetch(tls *libc.TLS, pFile uintptr, iOfst int64, p uintptr) int32 {
	f := fileOf(pFile)
	if f.inner.FiVersion < 3 || f.inner.FxUnfetch == 0 {
		return sqlite3.SQLITE_OK
	}
	return call[func(*libc.TLS, uintptr, int64, uintptr) int32](f.inner.FxUnfetch)(tls, innerFile(pFile), iOfst, p)
}
