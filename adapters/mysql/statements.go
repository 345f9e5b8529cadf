package mysql

// statements holds the SQL of one schema, rendered once by New ({{in}}, where a statement has
// one, is filled per call with its placeholders).
type statements struct {
	publish, publishKeyed, depths, heartbeat                       string
	publishRow                                                     string
	pickQueue, lease, nextDueQueue                                 string
	pickLevel                                                      string
	exclusiveRow, exclusiveTake, exclusiveRelease, exclusiveExtend string
	ackOne, lockRows, deleteRows, retry                            string
	lockKeys, keyHead, nextOfKey, makeDue, holdsKey                string
	takeExpiredIDs, insertIDs, heldIDs, pruneIDs                   string
	inspectQueues, inspectPage, inspectFind, replaceBody           string
	removeRow, reapQueues, reapPick, reapCount                     string
	limitLock, limitCount                                          string
	fairRow, fairTurn, fairMove, fairKeysAfter, fairKeysUpTo       string
	fairBusy, pickKey, pickKeyLevel                                string
	uniqueTake, uniqueHolder, uniqueReplace, uniqueMove            string
	pruneUnique                                                    string
}

// renderAll renders every statement for schema.
func renderAll(schema string) statements {
	r := func(s string) string { return render(schema, s) }
	return statements{
		publish: r(sqlPublish), publishRow: r(sqlPublishRow), publishKeyed: r(sqlPublishKeyed), depths: r(sqlDepths), heartbeat: r(sqlHeartbeat),
		pickQueue: r(sqlPickQueue), lease: r(sqlLease), nextDueQueue: r(sqlNextDueQueue), pickLevel: r(sqlPickLevel),
		exclusiveRow: r(sqlExclusiveRow), exclusiveTake: r(sqlExclusiveTake),
		exclusiveRelease: r(sqlExclusiveRelease), exclusiveExtend: r(sqlExclusiveExtend),
		ackOne: r(sqlAckOne), lockRows: r(sqlLockRows), deleteRows: r(sqlDeleteRows), retry: r(sqlRetry),
		lockKeys: r(sqlLockKeys), keyHead: r(sqlKeyHead), nextOfKey: r(sqlNextOfKey), makeDue: r(sqlMakeDue), holdsKey: r(sqlHoldsKey),
		takeExpiredIDs: r(sqlTakeExpiredIDs), insertIDs: r(sqlInsertIDs), heldIDs: r(sqlHeldIDs), pruneIDs: r(sqlPruneIDs),
		inspectQueues: r(sqlInspectQueues), inspectPage: r(sqlInspectPage), inspectFind: r(sqlInspectFind), replaceBody: r(sqlReplaceBody),
		removeRow: r(sqlRemoveRow), reapQueues: r(sqlReapQueues), reapPick: r(sqlReapPick), reapCount: r(sqlReapCount),
		limitLock: r(sqlLimitLock), limitCount: r(sqlLimitCount),
		fairRow: r(sqlFairRow), fairTurn: r(sqlFairTurn), fairMove: r(sqlFairMove),
		fairKeysAfter: r(sqlFairKeysAfter), fairKeysUpTo: r(sqlFairKeysUpTo), fairBusy: r(sqlFairBusy), pickKey: r(sqlPickKey), pickKeyLevel: r(sqlPickKeyLevel),
		uniqueTake: r(sqlUniqueTake), uniqueHolder: r(sqlUniqueHolder), uniqueReplace: r(sqlUniqueReplace),
		uniqueMove: r(sqlUniqueMove), pruneUnique: r(sqlPruneUnique),
	}
}
