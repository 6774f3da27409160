'use client'
/**
 * The project's stacks with live status: any stack-level event of the
 * project (the socket's project room) refetches the list, at most every
 * 300 ms, so the badges and progress stay current without polling.
 */
import Link from 'next/link'
import { useCallback, useEffect, useRef, useState } from 'react'
import type { StackSummary } from '../lib/services/reads'
import { api } from './api'
import { getSocket } from './socket'
import { ProgressBar, StatusBadge } from './StatusBadge'

const STATUSES = ['', 'IN_PROGRESS', 'COMPLETE', 'FAILED']

export function StacksList() {
  const [stacks, setStacks] = useState<StackSummary[] | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [name, setName] = useState('')
  const [status, setStatus] = useState('')
  const query = useRef({ name, status })
  query.current = { name, status }

  const load = useCallback(async () => {
    const q = new URLSearchParams({ limit: '200' })
    if (query.current.name) q.set('name', query.current.name)
    if (query.current.status) q.set('status', query.current.status)
    try {
      const r = await api<{ stacks: StackSummary[] }>('GET', `/api/stacks?${q}`)
      setStacks(r.stacks)
      setError(null)
    } catch (e) {
      setError((e as Error).message)
    }
  }, [])

  useEffect(() => {
    void load()
  }, [load, name, status])

  useEffect(() => {
    const socket = getSocket()
    let timer: ReturnType<typeof setTimeout> | null = null
    const refetch = () => {
      timer ??= setTimeout(() => {
        timer = null
        void load()
      }, 300)
    }
    socket.on('project:stack', refetch)
    socket.on('connect', refetch)
    return () => {
      socket.off('project:stack', refetch)
      socket.off('connect', refetch)
      if (timer) clearTimeout(timer)
    }
  }, [load])

  return (
    <section>
      <div className="toolbar">
        <h1>Stacks</h1>
        <span className="spacer" />
        <label>
          Search <input type="search" value={name} onChange={(e) => setName(e.target.value)} placeholder="name contains…" aria-label="search stacks by name" />
        </label>
        <label>
          Status{' '}
          <select value={status} onChange={(e) => setStatus(e.target.value)} aria-label="filter by status">
            {STATUSES.map((s) => <option key={s} value={s}>{s || 'any'}</option>)}
          </select>
        </label>
        <Link className="button" href="/stacks/new">New stack</Link>
      </div>
      {error && <p role="alert" className="error">{error}</p>}
      {stacks && stacks.length === 0 && <p className="empty">No stacks{name || status ? ' match' : ' yet'}. <Link href="/stacks/new">Create one</Link>.</p>}
      {stacks && stacks.length > 0 && (
        <div className="table-wrap" tabIndex={0} aria-label="stacks (scrollable)">
        <table className="grid" aria-label="stacks">
          <thead>
            <tr><th>Name</th><th>Status</th><th>Progress</th><th>Reason</th><th>Updated</th></tr>
          </thead>
          <tbody>
            {stacks.map((s) => (
              <tr key={s.id} data-stack={s.name}>
                <td><Link href={`/stacks/${s.id}`}>{s.name}</Link></td>
                <td><StatusBadge action={s.action} status={s.status} /></td>
                <td>{s.progress && s.status === 'IN_PROGRESS' ? <ProgressBar done={s.progress.done} total={s.progress.total} label={`${s.name} progress`} /> : null}
                  {s.progress && s.progress.blocked > 0 ? <span className="note"> {s.progress.blocked} blocked</span> : null}</td>
                <td className="reason">{s.statusReason}</td>
                <td>{new Date(s.updatedAt ?? s.createdAt).toLocaleString()}</td>
              </tr>
            ))}
          </tbody>
        </table>
        </div>
      )}
    </section>
  )
}
