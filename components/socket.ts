'use client'
/**
 * One Socket.IO connection per page, authenticated by the session cookie.
 * Its state (connecting / connected / disconnected) is shown in the header.
 */
import { useEffect, useState } from 'react'
import { io, type Socket } from 'socket.io-client'
import type { ClientToServerEvents, ServerToClientEvents } from '../lib/realtime/contracts'

export type KilnSocket = Socket<ServerToClientEvents, ClientToServerEvents>
export type ConnectionState = 'connecting' | 'connected' | 'disconnected'

let socket: KilnSocket | null = null
const listeners = new Set<(s: ConnectionState) => void>()
let state: ConnectionState = 'connecting'

function setState(s: ConnectionState) {
  state = s
  for (const l of listeners) l(s)
}

export function getSocket(): KilnSocket {
  if (!socket) {
    socket = io({ path: '/socket.io', transports: ['websocket', 'polling'], withCredentials: true })
    socket.on('connect', () => setState('connected'))
    socket.on('disconnect', () => setState('disconnected'))
    socket.on('connect_error', () => setState('disconnected'))
    socket.io.on('reconnect_attempt', () => setState('connecting'))
  }
  return socket
}

export function closeSocket() {
  socket?.close()
  socket = null
  setState('disconnected')
}

export function useConnectionState(): ConnectionState {
  const [s, set] = useState<ConnectionState>(state)
  useEffect(() => {
    getSocket()
    set(state)
    listeners.add(set)
    return () => void listeners.delete(set)
  }, [])
  return s
}
