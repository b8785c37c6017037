package runtime

func (e *engine) loadPycZip() []byte { return nil }
