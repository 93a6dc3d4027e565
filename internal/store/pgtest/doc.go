// Package pgtest gives tests a real, empty Postgres database each. With
// APPSERVER_TEST_DATABASE_URL set it creates databases on that server;
// otherwise it starts one throwaway cluster per test binary, listening only
// on a unix socket in a temporary directory (under /dev/shm when it is big
// enough, else /tmp), which Stop removes.
//
// A test package that uses it stops the cluster from its TestMain:
//
//	func TestMain(m *testing.M) {
//		goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
//			pgtest.Stop()
//			os.Exit(code)
//		}))
//	}
//
// It must not import any package of the module, and only test files may
// import it.
package pgtest
